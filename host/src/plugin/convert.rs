//! Protobuf messages of `Shared.proto` to and from the domain types of [`crate::action`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::proto::generated as pb;
use crate::action::{OperationProgress, ResourceId, Selector};

/// Go's zero `time.Time` (`0001-01-01T00:00:00Z`) as a protobuf timestamp: what Velero reads as
/// "not set". A *missing* timestamp would read as 1970-01-01, a real time (docs/plugin-protocol.md#s9-3).
pub const GO_ZERO_TIME: prost_types::Timestamp = prost_types::Timestamp {
    seconds: -62_135_596_800,
    nanos: 0,
};

/// A domain identifier as a `ResourceIdentifier`.
pub(crate) fn resource_identifier(id: ResourceId) -> pb::ResourceIdentifier {
    pb::ResourceIdentifier {
        group: id.group,
        resource: id.resource,
        namespace: id.namespace,
        name: id.name,
    }
}

/// A list of domain identifiers as `ResourceIdentifier`s.
pub(crate) fn resource_identifiers(ids: Vec<ResourceId>) -> Vec<pb::ResourceIdentifier> {
    ids.into_iter().map(resource_identifier).collect()
}

/// A `ResourceIdentifier` as a domain identifier.
pub(crate) fn resource_id(id: pb::ResourceIdentifier) -> ResourceId {
    ResourceId {
        group: id.group,
        resource: id.resource,
        namespace: id.namespace,
        name: id.name,
    }
}

/// An action's selector as the `ResourceSelector` of an AppliesTo response.
pub(crate) fn resource_selector(selector: &Selector) -> pb::ResourceSelector {
    pb::ResourceSelector {
        included_namespaces: selector.included_namespaces.clone(),
        excluded_namespaces: selector.excluded_namespaces.clone(),
        included_resources: selector.included_resources.clone(),
        excluded_resources: selector.excluded_resources.clone(),
        selector: selector.label_selector.clone(),
    }
}

/// An operation's progress as `OperationProgress`. Times not (yet) known are sent as Go's zero time,
/// which Velero treats as unset, exactly as a Go plugin would send them.
pub(crate) fn operation_progress(progress: OperationProgress) -> pb::OperationProgress {
    pb::OperationProgress {
        completed: progress.completed,
        err: progress.error.unwrap_or_default(),
        n_completed: progress.n_completed,
        n_total: progress.n_total,
        operation_units: progress.units,
        description: progress.description,
        started: Some(progress.started.map_or(GO_ZERO_TIME, timestamp)),
        updated: Some(progress.updated.map_or(GO_ZERO_TIME, timestamp)),
    }
}

/// A wall-clock time as a protobuf timestamp.
pub(crate) fn timestamp(time: SystemTime) -> prost_types::Timestamp {
    match time.duration_since(UNIX_EPOCH) {
        Ok(d) => prost_types::Timestamp {
            seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nanos: d.subsec_nanos() as i32,
        },
        Err(before) => {
            let d = before.duration();
            let seconds = -i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            match d.subsec_nanos() {
                0 => prost_types::Timestamp { seconds, nanos: 0 },
                n => prost_types::Timestamp {
                    seconds: seconds - 1,
                    nanos: (1_000_000_000 - n) as i32,
                },
            }
        }
    }
}

/// A duration as a protobuf duration.
pub(crate) fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: d.subsec_nanos() as i32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_sets_every_timestamp() {
        let started = UNIX_EPOCH + Duration::new(1_700_000_000, 5);
        let p = operation_progress(OperationProgress {
            completed: true,
            error: Some("failed".into()),
            n_completed: 3,
            n_total: 4,
            units: "bytes".into(),
            description: "d".into(),
            started: Some(started),
            updated: None,
        });
        assert_eq!(p.err, "failed");
        assert_eq!(
            p.started,
            Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 5
            })
        );
        assert_eq!(p.updated, Some(GO_ZERO_TIME));
    }

    #[test]
    fn times_before_1970_keep_positive_nanos() {
        let t = UNIX_EPOCH - Duration::new(1, 250_000_000);
        assert_eq!(
            timestamp(t),
            prost_types::Timestamp {
                seconds: -2,
                nanos: 750_000_000
            }
        );
        assert_eq!(
            duration(Duration::from_millis(1500)),
            prost_types::Duration {
                seconds: 1,
                nanos: 500_000_000
            }
        );
    }
}
