// A loss-scale update in apex's style: one thread, integer counters read and written in place
// (in-out int buffers, which a port starts as NaN's integer form), a float scale beside them.
#include <cuda_runtime.h>

__global__ void update_scale(float *scale, int *growth_tracker, const int *found_inf, float growth_factor,
                             float backoff_factor, int growth_interval) {
    if (*found_inf) {
        *scale = *scale * backoff_factor;
        *growth_tracker = 0;
    } else {
        const int successful = *growth_tracker + 1;
        if (successful == growth_interval) {
            *scale = *scale * growth_factor;
            *growth_tracker = 0;
        } else {
            *growth_tracker = successful;
        }
    }
}

void update(float *scale, int *growth_tracker, const int *found_inf, float growth_factor, float backoff_factor,
            int growth_interval) {
    update_scale<<<1, 1>>>(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval);
}
