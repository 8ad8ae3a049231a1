//! Gradient averaging over one flat buffer cut into fixed-size buckets: one all-reduce per
//! bucket, all in flight together, instead of one per parameter tensor. Every rank then holds
//! the same averaged gradient and applies the same optimizer step.

use std::time::{Duration, Instant};

use anyhow::Result;
use tch::Tensor;

use crate::group::ProcessGroup;

/// DDP's default bucket size: large enough that per-call latency is amortised, small enough
/// that several buckets of a large model are in flight at once.
pub const DEFAULT_BUCKET_BYTES: usize = 25 << 20;

/// Element ranges `[start, start + len)` of the flat gradient, one per bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buckets {
    ranges: Vec<(i64, i64)>,
}

impl Buckets {
    /// Cuts `numel` elements of `element_bytes` each into buckets of at most `bucket_bytes`.
    pub fn new(numel: i64, element_bytes: usize, bucket_bytes: usize) -> Buckets {
        let per = (bucket_bytes / element_bytes.max(1)).max(1) as i64;
        let mut ranges = Vec::new();
        let mut start = 0;
        while start < numel {
            let len = per.min(numel - start);
            ranges.push((start, len));
            start += len;
        }
        Buckets { ranges }
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Views of `flat` (contiguous, 1-D), one per bucket: reducing them reduces `flat`.
    pub fn views(&self, flat: &Tensor) -> Vec<Tensor> {
        self.ranges
            .iter()
            .map(|&(start, len)| flat.narrow(0, start, len))
            .collect()
    }

    /// Averages `flat` over the ranks in place: one all-reduce per bucket, then a division by
    /// the world size. Returns the time spent in the collectives.
    pub fn average(&self, group: &ProcessGroup, flat: &mut Tensor) -> Result<Duration> {
        let start = Instant::now();
        group.allreduce_sum(&self.views(flat))?;
        let elapsed = start.elapsed();
        let _ = flat.g_div_scalar_(group.world as f64);
        Ok(elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_the_buffer_without_overlap() {
        let b = Buckets::new(10, 4, 12);
        assert_eq!(b.ranges, vec![(0, 3), (3, 3), (6, 3), (9, 1)]);
        assert_eq!(Buckets::new(10, 4, 1 << 20).ranges, vec![(0, 10)]);
        assert!(Buckets::new(0, 4, 12).is_empty());
        let flat = Tensor::arange(10, (tch::Kind::Float, tch::Device::Cpu));
        let mut views = b.views(&flat);
        assert_eq!(views.len(), 4);
        let _ = views[1].g_mul_scalar_(0.0);
        assert_eq!(flat.double_value(&[4]), 0.0);
        assert_eq!(flat.double_value(&[6]), 6.0);
    }
}
