//! Everything else the controller writes: the bootstrap records, security changes (passed
//! through), views, transforms (a generation bump per deploy), plugin versions, producer-id
//! blocks (KIP-730) and feature levels.

use sluice_kafka::ErrorCode;
use sluice_security::records::SecurityRecord;

use super::brokers::current_broker;
use super::{Controller, ControllerError, Decision};
use crate::image::MetadataImage;
use crate::limits;
use crate::mutants::{Mutant, mutant};
use crate::records::{MetadataRecord, PluginVersion, ProducerIdsRecord};

/// A block of producer ids: `first..first + len`, never handed out again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdBlock {
    /// The first id.
    pub first: i64,
    /// How many ([`limits::PRODUCER_ID_BLOCK_SIZE`]).
    pub len: i64,
}

impl Controller {
    /// The first records of a new cluster's log (`sluice cluster format`): its id.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for an id past `CLUSTER_ID_BYTES_MAX` or empty.
    pub fn bootstrap_records(cluster_id: &str) -> Result<Vec<MetadataRecord>, ControllerError> {
        let record = MetadataRecord::ClusterId {
            cluster_id: cluster_id.to_owned(),
        };
        valid(&record)?;
        Ok(vec![record])
    }

    /// Security changes (SCRAM, ACLs, quotas, delegation tokens), passed through once they
    /// would apply: each is checked against the image's security state as it would be
    /// after the ones before it.
    ///
    /// # Errors
    /// `INVALID_REQUEST` with the refusal (a malformed record, a limit of the security
    /// state).
    pub fn security(
        &mut self,
        image: &MetadataImage,
        changes: Vec<SecurityRecord>,
    ) -> Result<Decision<()>, ControllerError> {
        let mut dry_run = image.security().clone();
        let mut records = Vec::with_capacity(changes.len());
        for change in changes {
            let record = MetadataRecord::Security(change.clone());
            valid(&record)?;
            dry_run
                .apply(change)
                .map_err(|e| ControllerError::new(ErrorCode::InvalidRequest, e.to_string()))?;
            records.push(record);
        }
        batch_bound(records.len())?;
        Ok(Decision::new(records, ()))
    }

    /// A view is created or replaced.
    ///
    /// # Errors
    /// `INVALID_REQUEST` (a bad name, a spec not JSON or past `SPEC_BYTES_MAX`,
    /// `OBJECTS_MAX`).
    pub fn put_view(
        &mut self,
        image: &MetadataImage,
        name: &str,
        spec: Vec<u8>,
    ) -> Result<Decision<()>, ControllerError> {
        room(image.views().len(), image.views().contains_key(name))?;
        let record = MetadataRecord::View {
            name: name.to_owned(),
            spec,
        };
        valid(&record)?;
        Ok(Decision::new(vec![record], ()))
    }

    /// A view is removed.
    ///
    /// # Errors
    /// `RESOURCE_NOT_FOUND`.
    pub fn remove_view(
        &mut self,
        image: &MetadataImage,
        name: &str,
    ) -> Result<Decision<()>, ControllerError> {
        found(image.views().contains_key(name), "view", name)?;
        let record = MetadataRecord::RemoveView {
            name: name.to_owned(),
        };
        Ok(Decision::new(vec![record], ()))
    }

    /// A transform is deployed: its generation is one above the current deploy's.
    /// The answer is the new generation.
    ///
    /// # Errors
    /// As [`Controller::put_view`], and `UNKNOWN_SERVER_ERROR` past `u32::MAX`
    /// generations.
    pub fn put_transform(
        &mut self,
        image: &MetadataImage,
        name: &str,
        spec: Vec<u8>,
    ) -> Result<Decision<u32>, ControllerError> {
        let current = image.transforms().get(name);
        room(image.transforms().len(), current.is_some())?;
        let generation = current
            .map_or(Some(1), |t| t.generation.checked_add(1))
            .ok_or_else(|| ControllerError::new(ErrorCode::UnknownServerError, "generations"))?;
        let record = MetadataRecord::Transform {
            name: name.to_owned(),
            generation,
            spec,
        };
        valid(&record)?;
        Ok(Decision::new(vec![record], generation))
    }

    /// A transform is removed.
    ///
    /// # Errors
    /// `RESOURCE_NOT_FOUND`.
    pub fn remove_transform(
        &mut self,
        image: &MetadataImage,
        name: &str,
    ) -> Result<Decision<()>, ControllerError> {
        found(image.transforms().contains_key(name), "transform", name)?;
        let record = MetadataRecord::RemoveTransform {
            name: name.to_owned(),
        };
        Ok(Decision::new(vec![record], ()))
    }

    /// A plugin version is installed (the server has stored its bytes on enough brokers).
    ///
    /// # Errors
    /// `INVALID_REQUEST` (a bad name or size, `OBJECTS_MAX`).
    pub fn put_plugin(
        &mut self,
        image: &MetadataImage,
        version: PluginVersion,
    ) -> Result<Decision<()>, ControllerError> {
        room(
            image.plugins().len(),
            image.plugins().contains_key(&version.name),
        )?;
        let record = MetadataRecord::PluginVersion(version);
        valid(&record)?;
        Ok(Decision::new(vec![record], ()))
    }

    /// A plugin is removed.
    ///
    /// # Errors
    /// `RESOURCE_NOT_FOUND`.
    pub fn remove_plugin(
        &mut self,
        image: &MetadataImage,
        name: &str,
    ) -> Result<Decision<()>, ControllerError> {
        found(image.plugins().contains_key(name), "plugin", name)?;
        let record = MetadataRecord::RemovePlugin {
            name: name.to_owned(),
        };
        Ok(Decision::new(vec![record], ()))
    }

    /// AllocateProducerIds (KIP-730): the next block of
    /// [`limits::PRODUCER_ID_BLOCK_SIZE`] ids, for a broker of the current epoch.
    ///
    /// # Errors
    /// `BROKER_ID_NOT_REGISTERED`, `STALE_BROKER_EPOCH`, `UNKNOWN_SERVER_ERROR` when the id
    /// space is exhausted.
    pub fn allocate_producer_ids(
        &mut self,
        image: &MetadataImage,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<Decision<ProducerIdBlock>, ControllerError> {
        current_broker(image, broker_id, broker_epoch)?;
        let len = limits::PRODUCER_ID_BLOCK_SIZE;
        let mut first = image.next_producer_id();
        if mutant(Mutant::ProducerIdBlockReused) {
            first = (first - len).max(0);
        }
        let next_producer_id = first.checked_add(len).ok_or_else(|| {
            ControllerError::new(ErrorCode::UnknownServerError, "producer ids are exhausted")
        })?;
        let record = MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id,
            broker_epoch,
            next_producer_id,
        });
        Ok(Decision::new(vec![record], ProducerIdBlock { first, len }))
    }

    /// A feature's level (`metadata.version` and Sluice's own).
    ///
    /// # Errors
    /// `INVALID_REQUEST` (a bad name or level, `FEATURES_MAX`).
    pub fn set_feature_level(
        &mut self,
        image: &MetadataImage,
        name: &str,
        level: i16,
    ) -> Result<Decision<()>, ControllerError> {
        if !image.features().contains_key(name) && image.features().len() >= limits::FEATURES_MAX {
            return Err(ControllerError::new(
                ErrorCode::InvalidRequest,
                "FEATURES_MAX",
            ));
        }
        let record = MetadataRecord::FeatureLevel {
            name: name.to_owned(),
            level,
        };
        valid(&record)?;
        Ok(Decision::new(vec![record], ()))
    }
}

fn valid(record: &MetadataRecord) -> Result<(), ControllerError> {
    record
        .validate()
        .map_err(|e| ControllerError::new(ErrorCode::InvalidRequest, e.to_string()))
}

fn room(len: usize, replacing: bool) -> Result<(), ControllerError> {
    if !replacing && len >= limits::OBJECTS_MAX {
        return Err(ControllerError::new(
            ErrorCode::InvalidRequest,
            format!(
                "{} objects of this kind exist (OBJECTS_MAX)",
                limits::OBJECTS_MAX
            ),
        ));
    }
    Ok(())
}

fn found(present: bool, what: &str, name: &str) -> Result<(), ControllerError> {
    if !present {
        return Err(ControllerError::new(
            ErrorCode::ResourceNotFound,
            format!("no {what} {name}"),
        ));
    }
    Ok(())
}

fn batch_bound(records: usize) -> Result<(), ControllerError> {
    if records == 0 || records > limits::BATCH_RECORDS_MAX {
        return Err(ControllerError::new(
            ErrorCode::InvalidRequest,
            format!("{records} changes is not within 1..=BATCH_RECORDS_MAX"),
        ));
    }
    Ok(())
}
