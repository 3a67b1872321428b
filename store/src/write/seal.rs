//! Sealing a decision's personal data as it is written (docs/privacy.md): every
//! [`Personal`] value still in the clear — the guest of a new reservation in its event,
//! its row and the stored answer, a cancellation's reason — is sealed under its guest's
//! key before the one statement that writes them runs, inside the same transaction.
//!
//! The writer finds the values by where the domain's types put them (the payload's
//! event tag, then the field), as slots of JSON: the events are already serialized by
//! then, in the order their streams will be written. One read of the key store serves
//! the whole batch: the guests' live keys (made for new guests) and the keys of values
//! sealed before (a reason is sealed under the key of the reservation's guest).

use std::collections::{HashMap, HashSet};

use aggregates::{GuestId, Personal, Sealed};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::attempt::AttemptError;
use crate::error::CommandError;
use crate::privacy::{cipher, Binding, KeyState, Privacy, PrivacyError};

/// Whose key seals a slot.
#[derive(Debug, Clone)]
pub(super) enum Owner {
    /// A guest known by e-mail (a new reservation's): their live key, made if need be.
    Email(String),
    /// The key the reservation's guest was sealed under.
    Key(Uuid),
    /// The reservation's guest was erased: the value is stored as erased.
    Erased,
}

impl Owner {
    /// The owner of the personal data of a reservation whose guest is `guest`.
    pub(super) fn of(guest: &Personal<aggregates::Guest>) -> Self {
        match guest {
            Personal::Clear(guest) => Self::Email(guest.email().to_owned()),
            Personal::Sealed(sealed) => Self::Key(sealed.key),
            Personal::Erased => Self::Erased,
        }
    }
}

/// A value in the clear (`{"clear": ...}`) to seal in place.
pub(super) struct Slot<'a> {
    pub value: &'a mut Value,
    pub binding: Binding,
    pub owner: Owner,
}

/// Whether `value` is a personal value in the clear.
pub(super) fn is_clear(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|o| o.len() == 1 && o.contains_key("clear"))
}

fn failed(e: impl std::fmt::Display) -> AttemptError {
    AttemptError::Fatal(CommandError::Internal(format!(
        "sealing personal data: {e}"
    )))
}

impl From<PrivacyError> for AttemptError {
    fn from(e: PrivacyError) -> Self {
        failed(e)
    }
}

/// Seals every slot (see the module docs).
pub(super) async fn seal(
    conn: &mut PgConnection,
    privacy: &Privacy,
    slots: Vec<Slot<'_>>,
) -> Result<(), AttemptError> {
    if slots.is_empty() {
        return Ok(());
    }
    let mut ids: HashMap<String, GuestId> = HashMap::new();
    let mut keys: HashSet<Uuid> = HashSet::new();
    for slot in &slots {
        match &slot.owner {
            Owner::Email(email) if !ids.contains_key(email) => {
                let id = privacy.guest_id(&mut *conn, email).await?;
                ids.insert(email.clone(), id);
            }
            Owner::Key(key) => {
                keys.insert(*key);
            }
            Owner::Email(_) | Owner::Erased => {}
        }
    }
    let guests: Vec<GuestId> = ids.values().cloned().collect();
    let keys: Vec<Uuid> = keys.into_iter().collect();
    let (live, known) = privacy
        .store()
        .sealing_keys(&mut *conn, &guests, &keys)
        .await
        .map_err(failed)?;
    for slot in slots {
        let key = match &slot.owner {
            Owner::Email(email) => {
                let id = ids
                    .get(email)
                    .ok_or_else(|| failed("a guest without an id"))?;
                Some(
                    live.get(id)
                        .ok_or_else(|| failed(format!("no key for {id}")))?,
                )
            }
            Owner::Key(key) => match known.get(key) {
                Some(KeyState::Live(key)) => Some(key),
                Some(KeyState::Destroyed) | None => None,
            },
            Owner::Erased => None,
        };
        let clear = slot.value.get_mut("clear").map(Value::take);
        *slot.value = match (key, clear) {
            (Some(key), Some(clear)) => {
                let sealed: Sealed = cipher::seal(&clear, key, slot.binding).map_err(failed)?;
                serde_json::to_value(Personal::<Value>::Sealed(sealed)).map_err(failed)?
            }
            // Erased before this was written: nothing may be stored of it.
            _ => serde_json::to_value(Personal::<Value>::Erased).map_err(failed)?,
        };
    }
    Ok(())
}
