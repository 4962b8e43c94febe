// rs_hot.rs: a Rust workload for demangling: its time in rs_hot::engine::Planner::optimize.
// Usage: rs_hot SECONDS. Built twice: legacy symbol mangling (rs_hot) and v0 (rs_hot_v0).
mod engine {
    pub struct Planner {
        pub v: Vec<u64>,
    }

    impl Planner {
        #[inline(never)]
        pub fn optimize(&mut self) -> u64 {
            let mut s = 0u64;
            for x in self.v.iter_mut() {
                *x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                s ^= *x >> 7;
            }
            s
        }
    }
}

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10.0);
    let end = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    let mut p = engine::Planner { v: vec![1; 100_000] };
    let mut sink = 0u64;
    while std::time::Instant::now() < end {
        sink ^= p.optimize();
    }
    println!("rs_hot: {}", sink & 1);
}
