// A 3x3 box blur of an 8-bit image: bytes that are data, an image the host allocates as w * h
// bytes that the kernel reads as rows of w (so the op takes it as [h, w]).
#include <cuda_runtime.h>
__global__ void box3(const unsigned char* in, unsigned char* out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int s = 0, k = 0;
    for (int dy = -1; dy <= 1; dy++) for (int dx = -1; dx <= 1; dx++) {
        int xx = x + dx, yy = y + dy;
        if (xx >= 0 && xx < w && yy >= 0 && yy < h) { s += in[yy * w + xx]; k++; }
    }
    out[y * w + x] = (unsigned char)(s / k);
}
void blur(int w, int h) {
    unsigned char *a, *b; cudaMalloc(&a, w * h); cudaMalloc(&b, w * h);
    dim3 block(16, 16), grid((w + 15) / 16, (h + 15) / 16);
    box3<<<grid, block>>>(a, b, w, h);
}
