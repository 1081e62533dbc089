//! CPU load for stress tests: threads that spin until dropped, competing with the
//! code under test for the cores (a race that shows only under load is still a bug).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Spinning threads; dropping the value stops and joins them.
#[derive(Debug)]
pub struct Busy {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Busy {
    /// Starts `n` spinning threads.
    pub fn start(n: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
