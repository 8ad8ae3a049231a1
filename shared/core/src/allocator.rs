//! Allocator settings for tools that churn through large buffers.
//!
//! glibc serves a block above its mmap threshold (at most 32 MiB, adjusted as blocks are freed)
//! with a fresh mapping and unmaps it on free, and gives free memory at the top of a heap back to
//! the system past its trim threshold. A tool that allocates and frees buffers of a few MiB by
//! the thousand (shardify's chunks, pieces and pages) then pays a page fault for every page of
//! every buffer: 13% of shardify's read half went to page faults. Fixed thresholds keep the
//! freed blocks for reuse instead.

/// Keeps freed blocks below `max_block` bytes for reuse, and up to `keep` bytes of free memory
/// per heap before any is returned. A no-op where the allocator is not glibc's.
pub fn reuse_freed_blocks(max_block: usize, keep: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let clamp = |bytes: usize| bytes.min(i32::MAX as usize) as libc::c_int;
        // SAFETY: mallopt only changes the allocator's tuning parameters; it is safe to call at
        // any time, and the values are within its documented ranges.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, clamp(max_block));
            libc::mallopt(libc::M_TRIM_THRESHOLD, clamp(keep));
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = (max_block, keep);
}
