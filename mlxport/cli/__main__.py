from mlxport.cli import main

main()
