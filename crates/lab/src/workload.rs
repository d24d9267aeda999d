//! The CPU-bound workload of the busy-server experiment (Bjørndalen et al., Tables 2 and 4-6): a
//! tiled matrix multiplication, run on the server's CPU beside the RPC server to see how much each
//! transport slows it down and how its round trips suffer.

use std::time::{Duration, Instant};

/// Matrix order and tile: 128x128 f64 (128 KiB a matrix), 32x32 tiles that fit in L1.
pub const N: usize = 128;
const TILE: usize = 32;

/// What the workload is, for reports.
pub fn description() -> String {
    format!("tiled {N}x{N} f64 matrix multiplication ({TILE}x{TILE} tiles)")
}

/// One unit of work: C += A * B, tiled.
pub fn multiply(a: &[f64], b: &[f64], c: &mut [f64]) {
    for ii in (0..N).step_by(TILE) {
        for kk in (0..N).step_by(TILE) {
            for jj in (0..N).step_by(TILE) {
                for i in ii..ii + TILE {
                    for k in kk..kk + TILE {
                        let aik = a[i * N + k];
                        let row = &mut c[i * N + jj..i * N + jj + TILE];
                        let brow = &b[k * N + jj..k * N + jj + TILE];
                        for (cv, bv) in row.iter_mut().zip(brow) {
                            *cv += aik * bv;
                        }
                    }
                }
            }
        }
    }
}

/// Runs units for `time`; returns (units, mean ns per unit).
pub fn run_for(time: Duration) -> (u64, f64) {
    let a: Vec<f64> = (0..N * N).map(|i| (i % 7) as f64 * 0.5).collect();
    let b: Vec<f64> = (0..N * N).map(|i| (i % 5) as f64 * 0.25).collect();
    let mut c = vec![0f64; N * N];
    let start = Instant::now();
    let mut units = 0u64;
    while start.elapsed() < time {
        multiply(&a, &b, &mut c);
        units += 1;
    }
    std::hint::black_box(&c);
    (units, start.elapsed().as_nanos() as f64 / units.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiled_product_equals_the_naive_one() {
        let a: Vec<f64> = (0..N * N).map(|i| (i % 11) as f64).collect();
        let b: Vec<f64> = (0..N * N).map(|i| (i % 13) as f64).collect();
        let mut c = vec![0f64; N * N];
        multiply(&a, &b, &mut c);
        for (i, j) in [(0, 0), (5, 77), (127, 127), (64, 3)] {
            let want: f64 = (0..N).map(|k| a[i * N + k] * b[k * N + j]).sum();
            assert_eq!(c[i * N + j], want);
        }
    }
}
