//! The denial ring buffer, read as an async stream.

use std::collections::VecDeque;

use aya::maps::{Map, MapData, RingBuf};
use carapace_common::DenyEvent;
use tokio::io::unix::AsyncFd;

/// Denials read from the ring buffer.
pub struct EventStream {
    ring: AsyncFd<RingBuf<MapData>>,
    pending: VecDeque<DenyEvent>,
}

impl EventStream {
    pub(super) fn new(map: Map) -> std::io::Result<Self> {
        let ring = RingBuf::try_from(map).map_err(std::io::Error::other)?;
        // SAFETY: the ring buffer owns its fd and keeps it open for as long as the AsyncFd
        // that owns the ring buffer exists.
        let ring =
            unsafe { AsyncFd::register(ring) }.map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Self {
            ring,
            pending: VecDeque::new(),
        })
    }

    /// The next denial; `None` once the ring buffer cannot be polled any more.
    pub async fn next(&mut self) -> Option<DenyEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            let mut guard = self.ring.readable_mut().await.ok()?;
            let ring = guard.get_inner_mut();
            while let Some(item) = ring.next() {
                // A record too short to be an event would be a build mismatch; skip it.
                if let Some(event) = DenyEvent::from_bytes(&item) {
                    self.pending.push_back(event);
                }
            }
            guard.clear_ready();
        }
    }
}
