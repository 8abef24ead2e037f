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

#[cfg(test)]
mod tests {
    use sluice_cluster::{MetadataRecord, encode_batch};

    use super::*;

    fn cluster_id(id: &str) -> Vec<u8> {
        encode_batch(&[MetadataRecord::ClusterId {
            cluster_id: id.to_owned(),
        }])
        .unwrap()
    }

    #[test]
    fn entries_apply_and_publish_and_a_bad_one_only_moves_the_index() {
        let (mut applier, watch) = ImageApplier::new();
        assert_eq!(applier.apply(3, &cluster_id("c1")), 0u32.to_be_bytes());
        assert_eq!(watch.borrow().cluster_id(), Some("c1"));
        let before = watch.borrow().snapshot_bytes().unwrap();

        assert_eq!(applier.apply(5, b"not a batch"), 0u32.to_be_bytes());
        assert_eq!(applier.refused(), 1);
        let after = watch.borrow().clone();
        assert_eq!(after.last_applied_index(), 5);
        assert_eq!(after.cluster_id(), Some("c1"), "nothing else changed");
        assert_ne!(
            after.snapshot_bytes().unwrap(),
            before,
            "the index is in the image"
        );
    }

    #[test]
    fn a_snapshot_restores_the_same_image_and_none_restores_the_empty_one() {
        let (mut applier, _) = ImageApplier::new();
        applier.apply(1, &cluster_id("c1"));
        let snapshot = applier.snapshot();
        let (mut restored, watch) = ImageApplier::new();
        restored.restore(Some(1), &snapshot).unwrap();
        assert_eq!(watch.borrow().snapshot_bytes().unwrap(), snapshot);
        assert!(restored.restore(Some(1), b"garbage").is_err());
        restored.restore(None, &[]).unwrap();
        assert_eq!(watch.borrow().cluster_id(), None);
    }
}
