//! The search across a city's hotels: what each can sell for a stay, as offers sorted by
//! price, and the hotels by their cheapest offer.
//!
//! Read like a hotel's availability (see `availability.rs`): from the Redis read model
//! when it can answer with confidence, else from the write side's rows, and either way
//! the offers are the domain's (`aggregates::booking::offers`), so the two sources list
//! the same offers at the same prices for the same nights. PostgreSQL answers when Redis
//! is down or slow, the model is not caught up, cannot read one of the city's hotels
//! or does not hold one whole (a room type or a night of the stay it has not seen is
//! unknown, not sold out), or an offer the answer would list takes a night's last rooms (its
//! `remaining` is no more than the rooms asked for), where a stale answer costs most.
//! Sold-out nights do not send a search to the database: they only hide offers, the
//! direction the cache errs in anyway.
//!
//! From the read model, a hotel whose nights read exactly as when the same question was
//! last judged is answered with the offers judged then (see `memo.rs`); the others are
//! decoded and judged, and kept.

use std::sync::Arc;

use aggregates::booking::Offer;
use aggregates::{Currency, Hotel};
use chrono::{DateTime, Utc};
use projections::availability::{HotelFields, Interner};

use super::availability::{holds_every_night, today_at, Source, StayQuery, StoredNight};
use super::memo::Question;
use super::{Lsn, Queries, QueryError};

/// Most hotels one search answers with.
pub const MAX_SEARCH_LIMIT: usize = 100;

/// A search of a city for a stay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CitySearch {
    /// Compared whatever its case.
    pub city: String,
    pub stay: StayQuery,
    /// Most hotels answered, 1 to [`MAX_SEARCH_LIMIT`].
    pub limit: usize,
    /// Only hotels pricing in this currency; `None`: every hotel, ranked within its
    /// currency (amounts in different currencies are never compared).
    pub currency: Option<Currency>,
}

/// One hotel of the answer, with its offers cheapest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotelOffers {
    pub hotel_id: i64,
    pub name: String,
    pub city: String,
    pub currency: Currency,
    pub offers: Vec<Offer>,
}

/// The hotels with at least one offer, cheapest first (ties by hotel id), at most
/// `limit` of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchAnswer {
    pub source: Source,
    pub as_of: DateTime<Utc>,
    pub hotels: Vec<HotelOffers>,
}

/// The hotels that have offers, at most `limit`, only those pricing in `currency` when
/// it is given: grouped by currency (by its code), and within one, by what their
/// cheapest offer costs the guest (`total_due_cents`), ties by id. Amounts in two
/// currencies are never compared. `offers` is each hotel's (id, catalog, offers), and
/// only those kept are named.
fn rank(
    mut offers: Vec<(i64, &Hotel, Vec<Offer>)>,
    limit: usize,
    currency: Option<Currency>,
) -> Vec<HotelOffers> {
    offers.retain(|(_, hotel, o)| {
        !o.is_empty() && currency.is_none_or(|wanted| hotel.currency() == wanted)
    });
    offers.sort_by_key(|(id, hotel, o)| {
        (
            hotel.currency().code(),
            o.iter().map(|o| o.total_due_cents).min(),
            *id,
        )
    });
    offers.truncate(limit);
    offers
        .into_iter()
        .map(|(hotel_id, hotel, offers)| {
            let (name, city) = hotel
                .details()
                .map(|d| (d.name().to_owned(), d.city().to_owned()))
                .unwrap_or_default();
            HotelOffers {
                hotel_id,
                name,
                city,
                currency: hotel.currency(),
                offers,
            }
        })
        .collect()
}

impl Queries {
    /// The offers of a city's hotels for a stay. When PostgreSQL answers, the replica
    /// may (past `token`).
    pub async fn search(
        &self,
        search: &CitySearch,
        token: Option<Lsn>,
    ) -> Result<SearchAnswer, QueryError> {
        // As for a hotel's availability: a write's token is answered from PostgreSQL.
        let cached = match token {
            None => self.cached_search(search).await,
            Some(_) => None,
        };
        let answer = match cached {
            Some(answer) => answer,
            None => {
                self.on_replica(token, |q| async move { q.database_search(search).await })
                    .await?
            }
        };
        metrics::counter!("search_reads_total", "source" => answer.source.as_str()).increment(1);
        Ok(answer)
    }

    async fn cached_search(&self, search: &CitySearch) -> Option<SearchAnswer> {
        let cache = self.availability.as_ref()?;
        let dates = search.stay.dates();
        let mut redis = cache.read_connection();
        let city = cache
            .within_timeout(
                cache
                    .reader
                    .read_city_fields(&mut redis, &search.city, &dates),
            )
            .await?;
        let now = self.clock.now();
        let stay = &search.stay;
        let asked: Vec<(Question, &HotelFields)> = city
            .hotels
            .iter()
            .map(|read| {
                let question = Question {
                    hotel_id: read.hotel_id,
                    start: stay.stay.start(),
                    end: stay.stay.end(),
                    rooms: stay.rooms.get(),
                    guests: stay.guests.get(),
                    today: today_at(&read.hotel, now),
                };
                (question, read)
            })
            .collect();
        let mut answered = cache.offers.recall(&asked);
        // The hotels whose nights read differently from the last time (or were never
        // judged for this stay): decoded and judged now, and kept.
        let mut judged = Vec::new();
        let mut terms = Interner::default();
        for ((question, read), answer) in asked.iter().zip(answered.iter_mut()) {
            if answer.is_some() {
                continue;
            }
            let days = read.decode(&dates, &mut terms)?;
            // A hotel the model does not hold whole is unknown, not sold out: the
            // database answers the search. (What the memo recalls was held whole when
            // it was judged, from these very bytes.)
            if !holds_every_night(&read.hotel, &stay.stay, |rt, date| days.view(rt, date)) {
                metrics::counter!("availability_cache_unknown_total").increment(1);
                return None;
            }
            let request = stay.offer_request(question.today);
            let offers: Arc<[Offer]> =
                aggregates::booking::offers(&read.hotel, &request, |rt, date| days.view(rt, date))
                    .into();
            *answer = Some(Arc::clone(&offers));
            judged.push((*question, *read, offers));
        }
        let reused = asked.len() - judged.len();
        metrics::counter!("search_hotels_judged_total", "from" => "memo").increment(reused as u64);
        metrics::counter!("search_hotels_judged_total", "from" => "nights")
            .increment(judged.len() as u64);
        cache.offers.keep(judged);
        let hotels = asked
            .iter()
            .zip(answered)
            .map(|((_, read), offers)| {
                let offers = offers.map(|o| o.to_vec()).unwrap_or_default();
                (read.hotel_id, &*read.hotel, offers)
            })
            .collect();
        let hotels = rank(hotels, search.limit, search.currency);
        let rooms = search.stay.rooms.get();
        let last_rooms = hotels
            .iter()
            .flat_map(|h| &h.offers)
            .any(|o| o.remaining <= rooms);
        if last_rooms {
            return None;
        }
        Some(SearchAnswer {
            source: Source::Cache,
            as_of: city.as_of,
            hotels,
        })
    }

    /// The write side's rows: the city's hotels (as the hotel list finds them) and
    /// their nights, exact as of now.
    async fn database_search(&self, search: &CitySearch) -> Result<SearchAnswer, QueryError> {
        let now = self.clock.now();
        let hotels: Vec<(i64, Hotel)> = self
            .hotels_in(&search.city)
            .await?
            .into_iter()
            .filter_map(|hotel| Some((hotel.hotel_id()?.get(), hotel)))
            .collect();
        let ids: Vec<i64> = hotels.iter().map(|(id, _)| *id).collect();
        let nights = if ids.is_empty() {
            Default::default()
        } else {
            self.stored_nights(&ids, &search.stay.stay, now).await?
        };
        let view = |id: i64| {
            let nights = &nights;
            move |rt: aggregates::RoomTypeId, date| {
                nights.get(&(id, rt.get(), date)).map(StoredNight::view)
            }
        };
        // The replica holds every hotel it lists whole, or the primary answers.
        if self.replica_as_of.is_some()
            && !hotels
                .iter()
                .all(|(id, hotel)| holds_every_night(hotel, &search.stay.stay, view(*id)))
        {
            return Err(QueryError::NotReplayed);
        }
        let answered = hotels
            .iter()
            .map(|(id, hotel)| {
                let request = search.stay.offer_request(today_at(hotel, now));
                let offers = aggregates::booking::offers(hotel, &request, view(*id));
                (*id, hotel, offers)
            })
            .collect();
        let (source, as_of) = self.database_as_of(now);
        Ok(SearchAnswer {
            source,
            as_of,
            hotels: rank(answered, search.limit, search.currency),
        })
    }
}
