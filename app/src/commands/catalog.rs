//! Catalog and inventory commands (staff): a hotel's details and room types, and the
//! per-night inventory and rates of a room type over a range. The acting staff
//! member's name is recorded with the events, as every other command records its
//! caller's.

use std::collections::BTreeMap;

use aggregates::booking::{self, AriUpdate, InventoryUpdate};
use aggregates::taxes::Taxes;
use aggregates::{
    CommandName, Currency, Hotel, HotelCommand, HotelDetails, HotelEvent, HotelId, InvalidInput,
    RatePlan, RatePlanId, Rejection, RoomTypeDetails, RoomTypeId, StayDates,
};
use chrono::NaiveDate;

use super::{Caller, CommandService};
use store::error::CommandError;
use store::write::{
    settle, with_retries, AttemptError, EventMetadata, Loader, WantedNights, Writer,
};

/// The hotel's details before `events`, if they change its currency.
fn currency_changed<'h>(hotel: &'h Hotel, events: &[HotelEvent]) -> Option<&'h HotelDetails> {
    let before = hotel.details()?;
    events
        .iter()
        .any(|e| {
            matches!(e, HotelEvent::HotelDetailsSet { details, .. }
                if details.currency() != before.currency())
        })
        .then_some(before)
}

/// Most nights one bulk update may set, over all its ranges: a year for a hundred room
/// types, with room to spare.
pub const MAX_ARI_NIGHTS: usize = 40_000;
/// Most ranges one bulk update may carry.
pub const MAX_ARI_UPDATES: usize = 1_000;

impl CommandService {
    /// Creates or updates a hotel's name, city, timezone and currency (`None`: the one
    /// it has, the euro for a new hotel). A currency change is refused while the hotel
    /// has a reservation not yet ended: its amounts are in the old currency's unit.
    pub async fn set_hotel(
        &self,
        by: &Caller,
        hotel_id: HotelId,
        details: HotelDetails,
        currency: Option<Currency>,
    ) -> Result<Hotel, CommandError> {
        let command = |hotel: &Hotel| HotelCommand::SetDetails {
            hotel_id,
            details: details
                .clone()
                .with_currency(currency.unwrap_or_else(|| hotel.currency())),
        };
        self.hotel_command(by, hotel_id, command, CommandName::SetHotel)
            .await
    }

    /// Replaces a hotel's taxes and fees (an empty list removes them). Stays already
    /// sold keep the taxes they were sold with.
    pub async fn set_taxes(
        &self,
        by: &Caller,
        hotel_id: HotelId,
        taxes: Taxes,
    ) -> Result<Hotel, CommandError> {
        let command = |_: &Hotel| HotelCommand::SetTaxes {
            taxes: taxes.clone(),
        };
        self.hotel_command(by, hotel_id, command, CommandName::SetTaxes)
            .await
    }

    /// Creates or updates a room type of an existing hotel.
    pub async fn set_room_type(
        &self,
        by: &Caller,
        hotel_id: HotelId,
        room_type_id: RoomTypeId,
        details: RoomTypeDetails,
    ) -> Result<Hotel, CommandError> {
        let command = |_: &Hotel| HotelCommand::SetRoomType {
            room_type_id,
            details: details.clone(),
        };
        self.hotel_command(by, hotel_id, command, CommandName::SetRoomType)
            .await
    }

    /// Creates or updates a rate plan of an existing hotel.
    pub async fn set_rate_plan(
        &self,
        by: &Caller,
        hotel_id: HotelId,
        rate_plan_id: RatePlanId,
        plan: RatePlan,
    ) -> Result<Hotel, CommandError> {
        let command = |_: &Hotel| HotelCommand::SetRatePlan {
            rate_plan_id,
            plan: plan.clone(),
        };
        self.hotel_command(by, hotel_id, command, CommandName::SetRatePlan)
            .await
    }

    /// One catalog command, `command` made from the hotel as loaded.
    ///
    /// A change takes the locks of the hotel's room types before it writes (see
    /// `Loader::lock_room_types`): the holds under way, which priced from the catalog
    /// as it was, commit first, and those after it wait and then meet the new version
    /// (`Writer::expect_catalog`). So in the log every sale follows the catalog it was
    /// priced from, as `audit verify` checks. A currency change then looks for a live
    /// stay in the old currency, with none under way.
    async fn hotel_command(
        &self,
        by: &Caller,
        hotel_id: HotelId,
        command: impl Fn(&Hotel) -> HotelCommand,
        name: CommandName,
    ) -> Result<Hotel, CommandError> {
        let metadata = EventMetadata {
            command: name,
            client: by.name().to_owned(),
            idempotency_key: None,
            staff_id: by.staff_id(),
        };
        let now = self.now();
        with_retries(self.config.retry, |_| async {
            let mut tx = self.pool.begin().await?;
            let result: Result<_, AttemptError> = async {
                let mut loader = Loader { conn: &mut tx };
                let (hotel, version) = loader.hotel(hotel_id).await?;
                let events = hotel.decide(command(&hotel)).map_err(Rejection::from)?;
                if !events.is_empty() {
                    loader
                        .lock_room_types(hotel_id, hotel.room_types().keys().copied())
                        .await?;
                }
                if let Some(before) = currency_changed(&hotel, &events) {
                    // Every night whose allocations are still kept (the retention pass
                    // deletes those of nights more than the longest stay and two days
                    // past): a stay not checked out, or a no-show not yet recorded,
                    // counts however long ago it ended, as long as it is remembered.
                    let from = now
                        .date_naive()
                        .checked_sub_days(chrono::Days::new(
                            u64::from(self.config.limits.max_nights) + 2,
                        ))
                        .unwrap_or(chrono::NaiveDate::MIN);
                    if let Some(reservation_id) = loader.live_reservation(hotel_id, from).await? {
                        return Err(Rejection::CurrencyInUse {
                            currency: before.currency(),
                            reservation_id,
                        }
                        .into());
                    }
                    // An open block's contracted rate is in the old currency too.
                    if let Some(code) = loader.open_block(hotel_id).await? {
                        return Err(Rejection::BlockInCurrency {
                            currency: before.currency(),
                            code,
                        }
                        .into());
                    }
                }
                let mut writer = Writer::new(&metadata)?;
                let after = writer.hotel(&mut tx, &hotel, version, &events).await?;
                writer.flush(&mut tx, &self.privacy).await?;
                Ok(after)
            }
            .await;
            settle(tx, result).await
        })
        .await
    }

    /// Sets total rooms (and optionally allowance and rate) on every night of `range`
    /// for one room type, or on none. Returns how many nights were set.
    pub async fn set_inventory(
        &self,
        by: &Caller,
        hotel_id: HotelId,
        room_type_id: RoomTypeId,
        range: StayDates,
        update: InventoryUpdate,
    ) -> Result<u32, CommandError> {
        if range.night_count() > self.config.max_inventory_nights {
            return Err(Rejection::from(InvalidInput::new(
                "end_date",
                format!(
                    "at most {} nights per inventory update",
                    self.config.max_inventory_nights
                ),
            ))
            .into());
        }
        let _room = self.bulk_room(range.night_count() as usize).await?;
        let now = self.now();
        let dates: Vec<NaiveDate> = range.nights().collect();
        let metadata = EventMetadata {
            command: CommandName::SetInventory,
            client: by.name().to_owned(),
            idempotency_key: None,
            staff_id: by.staff_id(),
        };
        let locks = self.config.strategy.locks_nights();
        with_retries(self.config.retry, |_| async {
            let mut tx = self.pool.begin().await?;
            let result: Result<_, AttemptError> = async {
                let mut loader = Loader { conn: &mut tx };
                if locks {
                    loader.lock_room_type(hotel_id, room_type_id).await?;
                }
                let (hotel, _) = loader.hotel(hotel_id).await?;
                let nights = loader
                    .nights(
                        WantedNights {
                            hotel_id,
                            room_type_id,
                            dates: dates.clone(),
                            peek: Vec::new(),
                        },
                        None,
                        now,
                        locks,
                    )
                    .await?;
                let decision = booking::set_inventory(
                    &hotel,
                    &nights.nights,
                    booking::SetInventory {
                        hotel_id,
                        room_type_id,
                        range,
                        update,
                        now,
                    },
                )?;
                let mut writer = Writer::new(&metadata)?;
                writer.queue_nights(&nights, &decision)?;
                writer.flush(&mut tx, &self.privacy).await?;
                Ok(range.night_count())
            }
            .await;
            settle(tx, result).await
        })
        .await
    }

    /// Applies bulk updates of inventory, restrictions and plan rates, in order, each on
    /// the nights of its range that fall on its days, all of them or none. Returns how
    /// many nights each update set. `command` names what the caller asked for (the
    /// single-range endpoints record theirs).
    pub async fn update_ari(
        &self,
        by: &Caller,
        command: CommandName,
        hotel_id: HotelId,
        updates: Vec<AriUpdate>,
    ) -> Result<Vec<u32>, CommandError> {
        let too_many = |message: String| -> CommandError {
            Rejection::from(InvalidInput::new("updates", message)).into()
        };
        if updates.is_empty() || updates.len() > MAX_ARI_UPDATES {
            return Err(too_many(format!(
                "must carry 1 to {MAX_ARI_UPDATES} updates"
            )));
        }
        let mut by_room_type: BTreeMap<RoomTypeId, Vec<NaiveDate>> = BTreeMap::new();
        let mut total = 0usize;
        for update in &updates {
            if update.range.night_count() > self.config.max_inventory_nights {
                return Err(Rejection::from(InvalidInput::new(
                    "end_date",
                    format!(
                        "at most {} nights per range",
                        self.config.max_inventory_nights
                    ),
                ))
                .into());
            }
            let dates = by_room_type.entry(update.room_type_id).or_default();
            let before = dates.len();
            dates.extend(update.dates());
            total += dates.len() - before;
            if total > MAX_ARI_NIGHTS {
                return Err(too_many(format!(
                    "at most {MAX_ARI_NIGHTS} nights per request"
                )));
            }
        }
        let _room = self.bulk_room(total).await?;
        let wanted: Vec<WantedNights> = by_room_type
            .into_iter()
            .map(|(room_type_id, mut dates)| {
                dates.sort_unstable();
                dates.dedup();
                WantedNights {
                    hotel_id,
                    room_type_id,
                    dates,
                    peek: Vec::new(),
                }
            })
            .collect();
        let now = self.now();
        let metadata = EventMetadata {
            command,
            client: by.name().to_owned(),
            idempotency_key: None,
            staff_id: by.staff_id(),
        };
        let cmd = booking::UpdateAri {
            hotel_id,
            updates,
            now,
        };
        let locks = self.config.strategy.locks_nights();
        with_retries(self.config.retry, |_| async {
            let mut tx = self.pool.begin().await?;
            let result: Result<_, AttemptError> = async {
                let mut loader = Loader { conn: &mut tx };
                if locks {
                    // In room type order, as every batch of holds takes them.
                    for room in &wanted {
                        loader.lock_room_type(hotel_id, room.room_type_id).await?;
                    }
                }
                let (hotel, _) = loader.hotel(hotel_id).await?;
                let loaded = loader.nights_of(&wanted, None, now, locks).await?;
                let nights: BTreeMap<RoomTypeId, aggregates::Nights> = loaded
                    .iter()
                    .map(|l| (l.room_type_id, l.nights.clone()))
                    .collect();
                let decided = booking::update_ari(&hotel, &nights, &cmd)?;
                let mut writer = Writer::new(&metadata)?;
                let stored = writer.set_metadata(&metadata)?.clone();
                for room in &loaded {
                    let decisions: Vec<(&serde_json::Value, &aggregates::Decision)> = decided
                        .decisions
                        .iter()
                        .filter(|(id, _)| *id == room.room_type_id)
                        .map(|(_, d)| (&stored, d))
                        .collect();
                    writer.queue_nights_of(room, &decisions)?;
                }
                writer.flush(&mut tx, &self.privacy).await?;
                Ok(decided.nights_per_update)
            }
            .await;
            settle(tx, result).await
        })
        .await
    }
}

/// What one horizon pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Extended {
    /// Room types whose sale was carried forward.
    pub room_types: usize,
    /// Nights put on sale.
    pub nights: u64,
}

impl CommandService {
    /// Keeps every room type that has inventory on sale `days` ahead: a room type whose
    /// last night comes before that gets the missing nights, each weekday as its latest
    /// night of the last week (rooms, allowance, rate, restrictions, plan rates; see
    /// `booking::roll_forward`), through the bulk ARI path, as staff named `horizon`.
    /// Safe in several processes: a second pass finds the nights there and does nothing.
    pub async fn extend_horizon(&self, days: u32) -> Result<Extended, CommandError> {
        let today = self.now().date_naive();
        let until = today + chrono::Duration::days(i64::from(days));
        let short: Vec<(i64, i64, NaiveDate)> = sqlx::query_as(
            "SELECT hotel_id, room_type_id, max(night) FROM room_nights
              GROUP BY hotel_id, room_type_id
             HAVING max(night) < $1
              ORDER BY hotel_id, room_type_id",
        )
        .bind(until - chrono::Duration::days(1))
        .fetch_all(&self.pool)
        .await?;
        let by = Caller::Staff("horizon".to_owned());
        let mut extended = Extended::default();
        for (hotel_id, room_type_id, last) in short {
            let (Ok(hotel_id), Ok(room_type_id)) =
                (HotelId::parse(hotel_id), RoomTypeId::parse(room_type_id))
            else {
                continue;
            };
            let Some(range) = booking::missing_range(last, today, until) else {
                continue;
            };
            let template = self.template_nights(hotel_id, room_type_id, last).await?;
            // One bulk update may set a bounded range: a year at a time.
            let mut from = range.start();
            while from < range.end() {
                let to = (from + chrono::Duration::days(366)).min(range.end());
                let Ok(part) = StayDates::parse(from, to) else {
                    break;
                };
                let updates = booking::roll_forward(room_type_id, &template, part);
                if updates.is_empty() {
                    break;
                }
                self.update_ari(&by, CommandName::UpdateAri, hotel_id, updates)
                    .await?;
                extended.nights += u64::from(part.night_count());
                from = to;
            }
            extended.room_types += 1;
        }
        if extended.nights > 0 {
            metrics::counter!("inventory_horizon_nights_total").increment(extended.nights);
        }
        Ok(extended)
    }

    /// The last [`booking::TEMPLATE_NIGHTS`] nights of a room type up to `last`, as the
    /// write side holds them.
    async fn template_nights(
        &self,
        hotel_id: HotelId,
        room_type_id: RoomTypeId,
        last: NaiveDate,
    ) -> Result<aggregates::Nights, CommandError> {
        let dates: Vec<NaiveDate> = (0..booking::TEMPLATE_NIGHTS)
            .rev()
            .map(|back| last - chrono::Duration::days(back))
            .collect();
        let mut conn = self.pool.acquire().await?;
        let loaded = Loader { conn: &mut conn }
            .nights(
                WantedNights {
                    hotel_id,
                    room_type_id,
                    dates,
                    peek: Vec::new(),
                },
                None,
                self.now(),
                false,
            )
            .await
            .map_err(super::lifecycle::attempt_to_command)?;
        Ok(loaded.nights)
    }
}
