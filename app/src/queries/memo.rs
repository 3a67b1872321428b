//! The offers of a hotel for a stay, kept with the exact nights they were judged from,
//! so a search that reads the same nights again does not judge them again.
//!
//! A city search reads every hotel's nights from Redis on every request (the read
//! model stays the source), then decodes them and runs the offer rule over every room
//! type and plan: most of a search's CPU (see docs/benchmarks.md, `redis-parser-and-rejudging`). Searches
//! repeat (the same city and dates, many times between two bookings of a hotel's
//! nights: hundreds of reads per booking), and the offers are a pure function of what
//! was read: the catalog (named by its stream sequence), the nights' stored fields
//! (which carry every room type's stream sequence, so equal bytes are equal nights),
//! the stay, rooms and guests, and the hotel's today. An entry is reused only when all
//! of those are equal, byte for byte; it is never stale, only unused. A booking of any
//! of the nights changes their bytes, and the next search judges them afresh.
//!
//! Bounded: past [`MAX_ENTRIES`] the memo starts afresh (about 1 KB an entry).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use aggregates::booking::Offer;
use chrono::NaiveDate;
use projections::availability::HotelFields;

/// Most entries kept; a city of 50 hotels searched for 60 different stays is 3,000.
const MAX_ENTRIES: usize = 8_192;

/// What a hotel's offers were asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Question {
    pub hotel_id: i64,
    pub start: NaiveDate,
    pub end: NaiveDate,
    pub rooms: u32,
    pub guests: u32,
    /// The hotel's date: restrictions on advance and the booking limits count from it.
    pub today: NaiveDate,
}

#[derive(Debug)]
struct Answer {
    catalog_seq: i64,
    nights: Vec<Option<Vec<u8>>>,
    offers: Arc<[Offer]>,
}

/// Offers by question, each with what it was judged from. One per process.
#[derive(Debug, Default)]
pub struct OfferMemo {
    answers: Mutex<HashMap<Question, Answer>>,
}

impl OfferMemo {
    /// The offers kept for each question whose hotel reads as it did then; `None`
    /// where it does not (or nothing is kept).
    pub fn recall(&self, asked: &[(Question, &HotelFields)]) -> Vec<Option<Arc<[Offer]>>> {
        let answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        asked
            .iter()
            .map(|(question, read)| {
                answers
                    .get(question)
                    .filter(|a| a.catalog_seq == read.catalog_seq && a.nights == read.nights())
                    .map(|a| Arc::clone(&a.offers))
            })
            .collect()
    }

    /// Keeps the offers judged for each question from what was read.
    pub fn keep(&self, judged: Vec<(Question, &HotelFields, Arc<[Offer]>)>) {
        if judged.is_empty() {
            return;
        }
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        if answers.len() + judged.len() > MAX_ENTRIES {
            answers.clear();
        }
        for (question, read, offers) in judged {
            answers.insert(
                question,
                Answer {
                    catalog_seq: read.catalog_seq,
                    nights: read.nights().to_vec(),
                    offers,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aggregates::{Cents, Hotel, RoomTypeId};

    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2027, 6, d).expect("date")
    }

    fn question(hotel_id: i64, start: u32) -> Question {
        Question {
            hotel_id,
            start: day(start),
            end: day(start + 3),
            rooms: 1,
            guests: 2,
            today: day(1),
        }
    }

    fn read(hotel_id: i64, catalog_seq: i64, night: &str) -> HotelFields {
        HotelFields::new(
            hotel_id,
            catalog_seq,
            Arc::new(Hotel::default()),
            vec![Some(night.as_bytes().to_vec()), None],
        )
    }

    fn offers(total: i64) -> Arc<[Offer]> {
        vec![Offer {
            room_type_id: RoomTypeId::parse(3).expect("id"),
            rate_plan_id: None,
            total_cents: Cents::new(total),
            remaining: 4,
            refundable: true,
            currency: aggregates::Currency::EUR,
            taxes: Vec::new(),
            total_due_cents: Cents::new(total),
        }]
        .into()
    }

    #[test]
    fn offers_are_recalled_only_for_the_same_question_over_the_same_nights() {
        // Given offers judged for hotel 7 over some nights
        let memo = OfferMemo::default();
        let judged = read(7, 2, "3=5,0,100,0,1,9,40");
        memo.keep(vec![(question(7, 10), &judged, offers(300))]);

        // Then the same question over the same bytes recalls them
        let same = read(7, 2, "3=5,0,100,0,1,9,40");
        let recalled = memo.recall(&[(question(7, 10), &same)]);
        assert_eq!(recalled[0].as_deref(), Some(&offers(300)[..]));

        // And a night that changed, a catalog that changed, another stay or another
        // hotel recall nothing
        let booked = read(7, 2, "3=5,0,100,0,2,10,41");
        let renamed = read(7, 3, "3=5,0,100,0,1,9,40");
        let other = read(8, 2, "3=5,0,100,0,1,9,40");
        let recalled = memo.recall(&[
            (question(7, 10), &booked),
            (question(7, 10), &renamed),
            (question(7, 11), &same),
            (question(8, 10), &other),
        ]);
        assert!(recalled.iter().all(Option::is_none), "{recalled:?}");
    }

    #[test]
    fn a_full_memo_starts_afresh() {
        let memo = OfferMemo::default();
        let reads: Vec<HotelFields> = (0..=MAX_ENTRIES as i64)
            .map(|h| read(h, 1, "3=5,0,100,0,0,1,1"))
            .collect();
        let judged = |range: std::ops::Range<usize>| {
            range
                .map(|i| (question(i as i64, 10), &reads[i], offers(100)))
                .collect::<Vec<_>>()
        };
        memo.keep(judged(0..MAX_ENTRIES));
        assert!(memo.recall(&[(question(0, 10), &reads[0])])[0].is_some());
        memo.keep(judged(MAX_ENTRIES..MAX_ENTRIES + 1));
        let last = MAX_ENTRIES;
        assert!(memo.recall(&[(question(0, 10), &reads[0])])[0].is_none());
        assert!(memo.recall(&[(question(last as i64, 10), &reads[last])])[0].is_some());
    }
}
