//! openraft's storage test suite (`openraft::testing::log::Suite::test_all`: its 44 cases of
//! log state, vote, reads, purge, truncation, membership, apply and snapshot transfer) run
//! against [`MetaLogStore`] and [`MetadataStateMachine`] on real files, each case in a fresh
//! temp dir.

use openraft::StorageError;
use openraft::testing::log::{StoreBuilder, Suite};

use super::TestImage;
use crate::cluster::{MetaLogStore, MetaTypes, MetadataStateMachine};

/// Builds a store and a state machine in a new temp dir, which lives as long as the case.
struct TempDirBuilder;

impl StoreBuilder<MetaTypes, MetaLogStore, MetadataStateMachine<TestImage>, tempfile::TempDir>
    for TempDirBuilder
{
    async fn build(
        &self,
    ) -> Result<
        (
            tempfile::TempDir,
            MetaLogStore,
            MetadataStateMachine<TestImage>,
        ),
        StorageError<MetaTypes>,
    > {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = MetaLogStore::open(&dir.path().join("raft")).expect("the log store opens");
        let sm = MetadataStateMachine::open(&dir.path().join("sm"), TestImage::default())
            .expect("the state machine opens");
        Ok((dir, store, sm))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openraft_storage_suite_passes() {
    Suite::test_all(TempDirBuilder)
        .await
        .expect("openraft's storage suite");
}
