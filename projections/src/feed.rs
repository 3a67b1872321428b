//! The public shape of one recorded event: an item of `/v1/events` and of a
//! reservation's history, and the body of every message the JetStream relay publishes.
//!
//! Defined once, here, because two readers outside the process depend on it being the
//! same: an auditor paging the HTTP feed and a consumer of the JetStream stream must be
//! able to treat one event from either source alike (the relay's test compares them).
//! It sits with the log's reader, under the HTTP layer, the relay and the webhooks
//! projection, which all use it.

use crate::log::StoredEvent;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventOut {
    /// Global position in the log.
    pub position: i64,
    /// `{aggregate_type}/{aggregate_id}`.
    #[schema(example = "reservation/812:0193f3c6-5b0e-7a51-9a0e-2c1c1f8b4a10")]
    pub stream: String,
    /// Sequence of the event within its stream.
    pub version: i64,
    #[serde(rename = "type")]
    #[schema(example = "ReservationHeld")]
    pub event_type: String,
    /// The version of the event type's schema `data` is written in.
    #[schema(example = "1.0")]
    pub event_version: String,
    pub recorded_at: DateTime<Utc>,
    pub data: serde_json::Value,
    pub metadata: serde_json::Value,
}

impl EventOut {
    /// The aggregate type and stream id of `stream` (`{aggregate_type}/{aggregate_id}`).
    pub fn stream_parts(&self) -> Option<(&str, &str)> {
        self.stream.split_once('/')
    }

    /// The payload as the log stores it: cqrs-es's externally tagged enum,
    /// `{"Type": {...}}` (what [`From<&StoredEvent>`] unwrapped into `data`).
    pub fn stored_payload(&self) -> serde_json::Value {
        let mut map = serde_json::Map::with_capacity(1);
        map.insert(self.event_type.clone(), self.data.clone());
        serde_json::Value::Object(map)
    }
}

impl From<&StoredEvent> for EventOut {
    fn from(e: &StoredEvent) -> Self {
        // The log's text of each column came from jsonb, so it parses; `Null` stands
        // for what cannot happen rather than failing the whole page.
        let parse = |raw: &serde_json::value::RawValue| {
            serde_json::from_str::<serde_json::Value>(raw.get()).unwrap_or_default()
        };
        // Stored payloads are cqrs-es's externally tagged enums: {"Type": {...}}.
        let data = match parse(&e.payload) {
            serde_json::Value::Object(map) if map.len() == 1 => {
                map.into_iter().next().map(|(_, v)| v).unwrap_or_default()
            }
            other => other,
        };
        Self {
            position: e.position,
            stream: format!("{}/{}", e.aggregate_type, e.aggregate_id),
            version: e.sequence,
            event_type: e.event_type.clone(),
            event_version: e.event_version.clone(),
            recorded_at: e.recorded_at,
            data,
            metadata: parse(&e.metadata),
        }
    }
}

impl From<StoredEvent> for EventOut {
    fn from(e: StoredEvent) -> Self {
        Self::from(&e)
    }
}
