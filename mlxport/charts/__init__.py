"""Report pieces: inline SVG charts and the HTML page style."""
