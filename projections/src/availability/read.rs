//! Reading the availability model: one hotel over some dates, or every hotel of a city
//! for a search, each in a bounded number of round trips, never one per hotel.
//!
//! - A hotel: round trip 1 is the current generation, that generation's `meta` and the
//!   hotel's `catalog_seq`, nights and terms, in one pipeline (the generation is the one
//!   the last read found, checked in the same pipeline; see [`Reader`]).
//! - A city: round trip 1 is the current generation, `meta` and the city's set of
//!   hotels; round trip 2 one pipeline of an `HMGET` per hotel (with the generation
//!   again, so a rebuild switching meanwhile is noticed).
//! - Either way, catalogs whose `catalog_seq` this process has not decoded yet are
//!   fetched in one more pipeline: after a catalog change, once per process.
//!
//! On a Redis Cluster each round trip is one pipeline per master, all sent at once: the
//! generation's keys share a slot, and so do a hotel's (see [`Keys`]); a city's hotels
//! are fanned out to the masters serving their buckets and merged back in id order.
//!
//! Decoding is what a read costs once the round trips are bounded: a hotel's catalog is
//! a few hundred bytes to kilobytes of JSON, and a city search reads fifty of them. So
//! the reader keeps each hotel's decoded `Hotel` with the sequence it reflects and
//! reuses it while the stored sequence is unchanged. The cache is bounded and only ever
//! holds what Redis held; a stale entry is never used, since the sequence is compared on
//! every read. A hotel's nights are decoded on every read: their fields are small and
//! positional (see `field.rs`). A city's are handed over as stored
//! ([`Reader::read_city_fields`]): the search decodes only the hotels whose nights it
//! has not judged as they now read (see the server's `queries::memo`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use aggregates::booking::NightView;
use aggregates::{Cents, Hotel, RoomTypeId};
use chrono::{DateTime, NaiveDate, Utc};
use redis::Value;

use super::field::{decode_night, CachedRoomNight, Interner};
use super::{bucket, night_field, CachedNight, Keys, NightTerms, CATALOG, CATALOG_SEQ};
use crate::redis_conn::{Parts, RedisConn};

/// Most hotels whose decoded catalogs a reader keeps; past it the cache starts afresh.
const MAX_CATALOGS: usize = 20_000;

/// One date of one hotel as cached: every room type's counters and terms.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedDay {
    pub date: NaiveDate,
    /// The room types with inventory on that night, in id order.
    pub room_types: Vec<(i64, CachedRoomNight)>,
}

impl CachedDay {
    fn room_type(&self, room_type: i64) -> Option<&CachedRoomNight> {
        self.room_types
            .iter()
            .find(|(id, _)| *id == room_type)
            .map(|(_, night)| night)
    }

    pub fn night(&self, room_type: i64) -> Option<&CachedNight> {
        self.room_type(room_type).map(|night| &night.counters)
    }

    pub fn terms(&self, room_type: i64) -> Option<&NightTerms> {
        self.room_type(room_type).map(|night| &*night.terms)
    }

    /// The night of `room_type` as the domain's offer rule reads it; `None` without
    /// inventory.
    pub fn view(&self, room_type: i64) -> Option<NightView<'_>> {
        let night = self.room_type(room_type)?;
        let remaining = u32::try_from(night.counters.remaining().max(0)).unwrap_or(u32::MAX);
        let view = NightView::plain(remaining, Cents::new(night.counters.rate_cents));
        let terms = &night.terms;
        Some(view.with_terms(&terms.restrictions, &terms.plan_rates))
    }
}

/// One hotel as cached: its catalog and the dates read.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedHotelDays {
    pub hotel_id: i64,
    pub hotel: Arc<Hotel>,
    /// One per date asked for, in the order asked.
    pub days: Vec<CachedDay>,
}

impl CachedHotelDays {
    pub fn day(&self, date: NaiveDate) -> Option<&CachedDay> {
        self.days.iter().find(|d| d.date == date)
    }

    /// The night of a room type on a date read, for the offer rule.
    pub fn view(&self, room_type: RoomTypeId, date: NaiveDate) -> Option<NightView<'_>> {
        self.day(date)?.view(room_type.get())
    }
}

/// A hotel's availability from the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedAvailability {
    pub as_of: DateTime<Utc>,
    pub hotel: CachedHotelDays,
}

/// Reads the model of one deployment. One per process, shared by every request: it
/// remembers the generation the last read found current, which the next read assumes
/// and checks in the same round trip (generations change only when the model is
/// rebuilt; a read that finds the pointer moved reads again under the new one, so it
/// never answers from a stale generation), and the decoded catalogs.
#[derive(Debug)]
pub struct Reader {
    keys: Keys,
    generation: AtomicI32,
    catalogs: Mutex<HashMap<i64, (i64, Arc<Hotel>)>>,
}

/// The `ready` and `as_of` of a generation's `meta`.
type Meta = (Option<String>, Option<String>);

/// A hotel's fields as read: `catalog_seq`, then the `n:` field of each date.
type Fields = Vec<Option<Vec<u8>>>;

impl Reader {
    pub fn new(keys: Keys) -> Self {
        Self {
            keys,
            // 0 is never a generation (they count from 1): the first read learns it.
            generation: AtomicI32::new(0),
            catalogs: Mutex::new(HashMap::new()),
        }
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Availability of `hotel` on `dates` from the generation readers use. `Ok(None)`
    /// when the cache cannot answer (not built, not caught up, unknown hotel, a field
    /// it cannot read): the caller then asks PostgreSQL. Errors mean Redis failed.
    pub async fn read(
        &self,
        redis: &mut RedisConn,
        hotel: i64,
        dates: &[NaiveDate],
    ) -> anyhow::Result<Option<CachedAvailability>> {
        let fields = hotel_fields(dates);
        let Some((generation, meta, values)) = self
            .at_current(redis, |generation, part| {
                part.hmget(self.keys.hotel(generation, hotel), &fields);
            })
            .await?
        else {
            return Ok(None);
        };
        let Some(as_of) = ready_as_of(meta) else {
            return Ok(None);
        };
        let Ok(values) = redis::from_redis_value::<Fields>(values) else {
            return Ok(None);
        };
        let Some(read) = Pending::of(hotel, values, dates) else {
            return Ok(None);
        };
        let hotels = self.with_catalogs(redis, generation, vec![read]).await?;
        Ok(hotels
            .as_ref()
            .and_then(|hotels| hotels.first())
            .and_then(|hotel| hotel.decode(dates, &mut Interner::default()))
            .map(|hotel| CachedAvailability { as_of, hotel }))
    }

    /// Every hotel of `city` (case-insensitive) on `dates` as stored, by id, its nights
    /// not decoded yet ([`HotelFields::decode`]): a caller that already judged the same
    /// nights (the same bytes) need not decode them again. `Ok(None)` as for
    /// [`Self::read`], and also when any of the city's hotels cannot be read.
    pub async fn read_city_fields(
        &self,
        redis: &mut RedisConn,
        city: &str,
        dates: &[NaiveDate],
    ) -> anyhow::Result<Option<CityFields>> {
        let Some((generation, meta, members)) = self
            .at_current(redis, |generation, part| {
                part.smembers(self.keys.city(generation, city));
            })
            .await?
        else {
            return Ok(None);
        };
        let Some(as_of) = ready_as_of(meta) else {
            return Ok(None);
        };
        let Ok(mut ids) = redis::from_redis_value::<Vec<i64>>(members) else {
            return Ok(None);
        };
        ids.sort_unstable();
        if ids.is_empty() {
            return Ok(Some(CityFields {
                as_of,
                hotels: Vec::new(),
            }));
        }
        let fields = hotel_fields(dates);
        let Some(replies) = self
            .hotels_at(redis, generation, &ids, |part, id| {
                part.hmget(self.keys.hotel(generation, id), &fields);
            })
            .await?
        else {
            return Ok(None);
        };
        let mut read = Vec::with_capacity(ids.len());
        for (id, values) in replies {
            match Pending::of(id, values, dates) {
                Some(hotel) => read.push(hotel),
                None => return Ok(None),
            }
        }
        read.sort_unstable_by_key(|hotel| hotel.hotel_id);
        let hotels = self.with_catalogs(redis, generation, read).await?;
        Ok(hotels.map(|hotels| CityFields { as_of, hotels }))
    }

    /// One round trip under the generation readers use: the current generation, its
    /// `meta`, and what `add` asks of it (keys of one slot). `None` when there is no
    /// current generation, or it moved twice in a row (rebuilds switching faster than
    /// reads: PostgreSQL answers).
    async fn at_current(
        &self,
        redis: &mut RedisConn,
        add: impl Fn(i32, &mut redis::Pipeline),
    ) -> anyhow::Result<Option<(i32, Meta, Value)>> {
        let mut generation = self.generation.load(Ordering::Relaxed);
        for _ in 0..2 {
            let mut parts = Parts::new();
            let mut global = redis::pipe();
            global
                .get(self.keys.current())
                .hmget(self.keys.meta(generation), &["ready", "as_of"]);
            parts.push(global);
            let mut asked = redis::pipe();
            add(generation, &mut asked);
            parts.push(asked);
            let mut replies = redis.query_parts(parts, false).await?.into_iter();
            let (Some(current), Some(meta), Some(value)) =
                (replies.next(), replies.next(), replies.next())
            else {
                return Ok(None);
            };
            let current: Option<i32> = redis::from_redis_value(current)?;
            let meta: Meta = redis::from_redis_value(meta)?;
            let Some(current) = current else {
                return Ok(None);
            };
            if current == generation {
                return Ok(Some((generation, meta, value)));
            }
            self.generation.store(current, Ordering::Relaxed);
            generation = current;
        }
        Ok(None)
    }

    /// One command per hotel of `ids` (`add`), a part per bucket, with the current
    /// generation checked in the same round trip: each hotel with its reply (grouped by
    /// bucket, not in the order of `ids`). `None` when the generation moved meanwhile.
    async fn hotels_at(
        &self,
        redis: &mut RedisConn,
        generation: i32,
        ids: &[i64],
        add: impl Fn(&mut redis::Pipeline, i64),
    ) -> anyhow::Result<Option<Vec<(i64, Fields)>>> {
        let mut by_bucket: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
        for id in ids {
            by_bucket.entry(bucket(*id)).or_default().push(*id);
        }
        let mut parts = Parts::new();
        let mut check = redis::pipe();
        // MGET answers with an array, as every HMGET does, so the replies share a type.
        check.mget(&[self.keys.current()]);
        parts.push(check);
        let mut order = Vec::with_capacity(ids.len());
        for hotels in by_bucket.into_values() {
            let mut part = redis::pipe();
            for id in hotels {
                add(&mut part, id);
                order.push(id);
            }
            parts.push(part);
        }
        let replies: Vec<Fields> = redis
            .query_parts(parts, false)
            .await?
            .into_iter()
            .map(redis::from_redis_value)
            .collect::<Result<_, _>>()?;
        if replies.len() != order.len() + 1 || !same_generation(replies.first(), generation) {
            return Ok(None);
        }
        Ok(Some(
            order.into_iter().zip(replies.into_iter().skip(1)).collect(),
        ))
    }

    /// Attaches each hotel's catalog: the decoded one this process keeps when its
    /// sequence is the stored one, else read (all of them in one round trip) and kept.
    /// `None` when a catalog cannot be read or the generation moved meanwhile.
    async fn with_catalogs(
        &self,
        redis: &mut RedisConn,
        generation: i32,
        pending: Vec<Pending>,
    ) -> anyhow::Result<Option<Vec<HotelFields>>> {
        let mut found: Vec<Option<Arc<Hotel>>> = {
            let cache = self.catalogs.lock().unwrap_or_else(PoisonError::into_inner);
            pending
                .iter()
                .map(|p| match cache.get(&p.hotel_id) {
                    Some((seq, hotel)) if *seq == p.catalog_seq => Some(Arc::clone(hotel)),
                    _ => None,
                })
                .collect()
        };
        let missing: Vec<usize> = (0..pending.len())
            .filter(|i| found.get(*i).is_some_and(Option::is_none))
            .collect();
        if !missing.is_empty() {
            let mut wanted: Vec<i64> = Vec::with_capacity(missing.len());
            for i in &missing {
                if let Some(p) = pending.get(*i) {
                    wanted.push(p.hotel_id);
                }
            }
            let Some(replies) = self
                .hotels_at(redis, generation, &wanted, |part, id| {
                    part.hmget(self.keys.hotel(generation, id), &[CATALOG_SEQ, CATALOG]);
                })
                .await?
            else {
                return Ok(None);
            };
            let replies: HashMap<i64, Fields> = replies.into_iter().collect();
            metrics::counter!("availability_catalog_decodes_total").increment(missing.len() as u64);
            let mut cache = self.catalogs.lock().unwrap_or_else(PoisonError::into_inner);
            for i in &missing {
                let Some(reply) = pending.get(*i).and_then(|p| replies.get(&p.hotel_id)) else {
                    return Ok(None);
                };
                let (Some(Some(seq)), Some(Some(json))) = (reply.first(), reply.get(1)) else {
                    return Ok(None);
                };
                let (Some(seq), Ok(hotel)) =
                    (parse_int(seq), serde_json::from_slice::<Hotel>(json))
                else {
                    return Ok(None);
                };
                let hotel = Arc::new(hotel);
                if cache.len() >= MAX_CATALOGS {
                    cache.clear();
                }
                let Some(p) = pending.get(*i) else {
                    return Ok(None);
                };
                cache.insert(p.hotel_id, (seq, Arc::clone(&hotel)));
                if let Some(slot) = found.get_mut(*i) {
                    *slot = Some(hotel);
                }
            }
        }
        let mut hotels = Vec::with_capacity(pending.len());
        for (p, hotel) in pending.into_iter().zip(found) {
            let Some(hotel) = hotel else {
                return Ok(None);
            };
            hotels.push(HotelFields {
                hotel_id: p.hotel_id,
                catalog_seq: p.catalog_seq,
                hotel,
                nights: p.nights,
            });
        }
        Ok(Some(hotels))
    }
}

/// A hotel read without its catalog yet.
struct Pending {
    hotel_id: i64,
    catalog_seq: i64,
    /// Each date's night field as stored.
    nights: Vec<Option<Vec<u8>>>,
}

impl Pending {
    /// A hotel's fields as read (`catalog_seq`, then each date's night); `None` for a
    /// hotel the model does not know.
    fn of(hotel_id: i64, mut values: Fields, dates: &[NaiveDate]) -> Option<Self> {
        if values.len() != 1 + dates.len() {
            return None;
        }
        let catalog_seq = parse_int(values.first()?.as_deref()?)?;
        values.remove(0);
        Some(Self {
            hotel_id,
            catalog_seq,
            nights: values,
        })
    }
}

/// One hotel as stored, its catalog attached and its nights not decoded yet.
#[derive(Debug, Clone)]
pub struct HotelFields {
    pub hotel_id: i64,
    /// The hotel stream's sequence its catalog reflects.
    pub catalog_seq: i64,
    pub hotel: Arc<Hotel>,
    /// Each date's night field as stored (`None`: no room type has inventory).
    nights: Vec<Option<Vec<u8>>>,
}

impl HotelFields {
    pub fn new(
        hotel_id: i64,
        catalog_seq: i64,
        hotel: Arc<Hotel>,
        nights: Vec<Option<Vec<u8>>>,
    ) -> Self {
        Self {
            hotel_id,
            catalog_seq,
            hotel,
            nights,
        }
    }

    /// The nights' fields as stored, one per date asked for: equal bytes are equal
    /// nights (they carry each room type's stream sequence).
    pub fn nights(&self) -> &[Option<Vec<u8>>] {
        &self.nights
    }

    /// The nights decoded; `terms` may be shared by every hotel of one read. `None` if
    /// a field cannot be read.
    pub fn decode<'a>(
        &'a self,
        dates: &[NaiveDate],
        terms: &mut Interner<'a>,
    ) -> Option<CachedHotelDays> {
        Some(CachedHotelDays {
            hotel_id: self.hotel_id,
            hotel: Arc::clone(&self.hotel),
            days: decode_days(&self.nights, dates, terms)?,
        })
    }
}

/// A city's hotels as stored, by id.
#[derive(Debug, Clone)]
pub struct CityFields {
    pub as_of: DateTime<Utc>,
    pub hotels: Vec<HotelFields>,
}

/// One hotel's nights decoded, one per date; `None` if a field cannot be read.
fn decode_days<'a>(
    nights: &'a [Option<Vec<u8>>],
    dates: &[NaiveDate],
    terms: &mut Interner<'a>,
) -> Option<Vec<CachedDay>> {
    if nights.len() != dates.len() {
        return None;
    }
    let mut days = Vec::with_capacity(dates.len());
    for (date, night) in dates.iter().zip(nights) {
        days.push(CachedDay {
            date: *date,
            room_types: match night {
                Some(field) => decode_night(field, terms)?,
                None => Vec::new(),
            },
        });
    }
    Some(days)
}

/// The fields a read asks of a hotel: `catalog_seq`, then every date's night.
fn hotel_fields(dates: &[NaiveDate]) -> Vec<String> {
    let mut fields = Vec::with_capacity(1 + dates.len());
    fields.push(CATALOG_SEQ.to_owned());
    fields.extend(dates.iter().map(|d| night_field(*d)));
    fields
}

/// A decimal integer stored by the projection.
fn parse_int(value: &[u8]) -> Option<i64> {
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// `as_of` of a generation that is ready; `None` otherwise.
fn ready_as_of((ready, as_of): Meta) -> Option<DateTime<Utc>> {
    if ready.as_deref() != Some("1") {
        return None;
    }
    as_of
        .and_then(|s| DateTime::parse_from_rfc3339(&s).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// Whether an `MGET current` reply names `generation`.
fn same_generation(reply: Option<&Fields>, generation: i32) -> bool {
    reply
        .and_then(|r| r.first())
        .and_then(|v| v.as_deref())
        .and_then(parse_int)
        == Some(i64::from(generation))
}
