//! [`ImageApplier`]: the state machine's image, `sluice_cluster::MetadataImage`, applied
//! entry by entry and published to the rest of the broker.
//!
//! Each committed entry's payload is decoded (`decode_batch`) and applied at its index. A
//! payload that does not decode, or records the image refuses, change nothing but the
//! applied index; that is decided by the bytes alone, so it is the same on every node, and
//! it is logged and counted ([`ImageApplier::refused`]). After every entry and restore the
//! new image is published on a `watch` channel: it holds only the latest, so a slow reader
//! never queues images.

use std::sync::Arc;

use sluice_cluster::{MetadataImage, decode_batch};
use tokio::sync::watch;

use super::types::{MetadataApply, RestoreError};

/// The published image: the latest applied, shared.
pub type ImageWatch = watch::Receiver<Arc<MetadataImage>>;

/// The metadata image as the state machine drives it.
#[derive(Debug)]
pub struct ImageApplier {
    image: MetadataImage,
    publish: watch::Sender<Arc<MetadataImage>>,
    refused: u64,
}

impl ImageApplier {
    /// An empty image, and the receiver that sees every image it applies.
    #[must_use]
    pub fn new() -> (ImageApplier, ImageWatch) {
        let image = MetadataImage::new();
        let (publish, watch) = watch::channel(Arc::new(image.clone()));
        let applier = ImageApplier {
            image,
            publish,
            refused: 0,
        };
        (applier, watch)
    }

    /// Entries and records refused since this node started (each logged).
    #[must_use]
    pub const fn refused(&self) -> u64 {
        self.refused
    }

    fn publish(&self) {
        self.publish.send_replace(Arc::new(self.image.clone()));
    }
}

impl MetadataApply for ImageApplier {
    /// Replies with the number of records refused (4 bytes, big-endian).
    fn apply(&mut self, index: u64, payload: &[u8]) -> Vec<u8> {
        let records = decode_batch(payload).unwrap_or_else(|e| {
            tracing::error!(index, error = %e, "metadata entry does not decode: applied as empty");
            self.refused += 1;
            Vec::new()
        });
        let refused = match self.image.apply_batch(index, &records) {
            Ok(refused) => refused,
            Err(e) => {
                // openraft applies each index once, in order: an index at or below the last
                // applied one is our bug, and the image stays as it is.
                tracing::error!(error = %e, "metadata entry applied out of order");
                debug_assert!(false, "metadata entry applied out of order: {e}");
                Vec::new()
            }
        };
        for (position, refusal) in &refused {
            tracing::warn!(
                index,
                position,
                ?refusal,
                "metadata record refused by the image"
            );
        }
        self.refused += refused.len() as u64;
        self.publish();
        (refused.len() as u32).to_be_bytes().to_vec()
    }

    fn snapshot(&self) -> Vec<u8> {
        // The image's own bounds keep its encoding under SNAPSHOT_BYTES_MAX; if one ever
        // exceeds it, an empty snapshot fails the state machine's snapshot (and its install
        // on a follower) loudly instead of shipping a truncated image.
        self.image.snapshot_bytes().unwrap_or_else(|e| {
            tracing::error!(error = %e, "metadata image snapshot failed");
            Vec::new()
        })
    }

    fn restore(&mut self, index: Option<u64>, bytes: &[u8]) -> Result<(), RestoreError> {
        self.image = match index {
            None => MetadataImage::new(),
            Some(_) => {
                MetadataImage::from_snapshot(bytes).map_err(|e| RestoreError(e.to_string()))?
            }
        };
        self.publish();
        Ok(())
    }
}
