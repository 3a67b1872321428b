//! Keeping a room type on sale a horizon ahead: the nights after the last one loaded are
//! set from a template, the last week loaded, weekday by weekday, so a hotel that loads
//! its inventory once never silently stops selling when the range runs out.
//!
//! A weekday's template is the latest loaded night on that weekday: its rooms,
//! overbooking allowance and rate, its restrictions (for every plan and per plan) and
//! its plans' own rates. A weekday the last week does not have (fewer than seven nights
//! loaded) takes the latest night's. The result is a bulk ARI update (see [`super::ari`]):
//! every inventory update first (the nights come into being), then the restrictions and
//! plan rates on them, all or nothing.

use chrono::NaiveDate;

use super::ari::{AriChange, AriUpdate};
use super::inventory::InventoryUpdate;
use super::Nights;
use crate::restrictions::RestrictionsPatch;
use crate::room_night::RoomNight;
use crate::types::{RoomTypeId, StayDates, Weekdays};

/// How many of the last loaded nights a template is drawn from.
pub const TEMPLATE_NIGHTS: i64 = 7;

/// The updates that put `range` on sale for `room_type_id` as `template` (its loaded
/// nights; the last [`TEMPLATE_NIGHTS`] of them count) has its last week; none if the
/// template has no night with inventory.
pub fn roll_forward(
    room_type_id: RoomTypeId,
    template: &Nights,
    range: StayDates,
) -> Vec<AriUpdate> {
    // The latest night with inventory of each weekday, latest first.
    let mut sources: Vec<(Weekdays, &RoomNight)> = Vec::new();
    let mut seen = Weekdays::NONE;
    for (date, night) in template.iter().rev().take(TEMPLATE_NIGHTS as usize) {
        if night.levels().is_none() || seen.contains(*date) {
            continue;
        }
        seen = seen.and(Weekdays::of(*date));
        sources.push((Weekdays::of(*date), night));
    }
    let Some(latest) = sources.first_mut() else {
        return Vec::new();
    };
    // Days the template lacks are the latest night's.
    latest.0 = latest.0.and(seen.rest());
    let mut inventory = Vec::new();
    let mut terms = Vec::new();
    for (days, night) in &sources {
        let Some(levels) = night.levels() else {
            continue;
        };
        let on = |change| AriUpdate {
            room_type_id,
            range,
            days: *days,
            change,
        };
        inventory.push(on(AriChange::Inventory(InventoryUpdate {
            total_rooms: Some(i64::from(levels.total_rooms())),
            overbooking_allowance: Some(i64::from(levels.overbooking_allowance())),
            rate_cents: Some(levels.rate_cents()),
        })));
        let restrictions = night.restrictions();
        if !restrictions.all.is_none() {
            terms.push(on(AriChange::Restrictions {
                rate_plan_id: None,
                patch: RestrictionsPatch::replacing(restrictions.all),
            }));
        }
        for (plan, own) in &restrictions.plans {
            terms.push(on(AriChange::Restrictions {
                rate_plan_id: Some(*plan),
                patch: RestrictionsPatch::replacing(*own),
            }));
        }
        for (plan, rate) in night.plan_rates() {
            terms.push(on(AriChange::PlanRate {
                rate_plan_id: *plan,
                rate_cents: *rate,
            }));
        }
    }
    inventory.extend(terms);
    inventory
}

/// The nights a room type whose last loaded night is `last` must gain to be on sale
/// through the day before `until`, never starting before `today`; `None` if it already
/// is.
pub fn missing_range(last: NaiveDate, today: NaiveDate, until: NaiveDate) -> Option<StayDates> {
    let from = last.succ_opt()?.max(today);
    StayDates::parse(from, until).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::restrictions::NightRestrictions;
    use crate::room_night::{RoomNightCommand, RoomNightKey};
    use crate::types::{Cents, HotelId, InventoryLevels, RatePlanId};
    use chrono::{Datelike, TimeZone, Utc};

    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2027, 6, d).expect("valid date")
    }

    fn room_type() -> RoomTypeId {
        RoomTypeId::parse(3).expect("id")
    }

    /// A night of `rooms` rooms at `rate`, with a minimum stay if `min_stay`.
    fn night(d: u32, rooms: u32, rate: i64, min_stay: Option<u32>) -> RoomNight {
        let key = RoomNightKey::new(HotelId::parse(7).expect("id"), room_type(), day(d));
        let now = Utc
            .with_ymd_and_hms(2027, 5, 1, 0, 0, 0)
            .single()
            .expect("time");
        let mut n = RoomNight::default();
        let levels = InventoryLevels::parse(i64::from(rooms), 0, Cents::new(rate)).expect("levels");
        for e in n
            .decide(RoomNightCommand::SetInventory { key, levels, now })
            .expect("set")
        {
            n.apply_event(&e);
        }
        if min_stay.is_some() {
            let restrictions = NightRestrictions {
                min_stay,
                ..NightRestrictions::default()
            };
            for e in n
                .decide(RoomNightCommand::SetRestrictions {
                    rate_plan_id: None,
                    patch: crate::restrictions::RestrictionsPatch::replacing(restrictions),
                })
                .expect("restricted")
            {
                n.apply_event(&e);
            }
        }
        n
    }

    #[test]
    fn each_weekday_is_rolled_forward_from_its_latest_night() {
        // Given a week of June 2027 (the 7th is a Monday): weekdays at 100.00 for 10
        // rooms, Friday and Saturday at 150.00 with a two-night minimum
        let template: Nights = (7..=13)
            .map(|d| {
                let weekend = matches!(day(d).weekday().num_days_from_monday(), 4 | 5);
                let n = if weekend {
                    night(d, 10, 15_000, Some(2))
                } else {
                    night(d, 10, 10_000, None)
                };
                (day(d), n)
            })
            .collect();
        let range = StayDates::parse(day(14), day(28)).expect("range");

        // When it is rolled forward
        let updates = roll_forward(room_type(), &template, range);

        // Then every weekday's inventory comes first, then the weekend's minimum stay
        assert_eq!(updates.len(), 7 + 2, "{updates:?}");
        assert!(updates[..7]
            .iter()
            .all(|u| matches!(u.change, AriChange::Inventory(_))));
        let friday = day(18);
        let rate_on = |date: NaiveDate| {
            updates.iter().find_map(|u| match u.change {
                AriChange::Inventory(i) if u.days.contains(date) => i.rate_cents,
                _ => None,
            })
        };
        assert_eq!(rate_on(friday), Some(Cents::new(15_000)));
        assert_eq!(rate_on(day(15)), Some(Cents::new(10_000)));
        assert!(updates[7..].iter().all(|u| {
            matches!(
                u.change,
                AriChange::Restrictions {
                    rate_plan_id: None,
                    ..
                }
            ) && (u.days.contains(friday) || u.days.contains(day(19)))
        }));
    }

    #[test]
    fn a_short_template_lends_its_latest_night_to_the_missing_weekdays() {
        let template: Nights = [
            (day(12), night(12, 5, 9_000, None)),
            (day(13), night(13, 6, 8_000, None)),
        ]
        .into_iter()
        .collect();
        let range = StayDates::parse(day(14), day(21)).expect("range");
        let updates = roll_forward(room_type(), &template, range);
        // Every day of the week is covered exactly once.
        for d in 14..21 {
            let covering: Vec<_> = updates.iter().filter(|u| u.days.contains(day(d))).collect();
            assert_eq!(covering.len(), 1, "{d}: {updates:?}");
        }
        let rooms_on = |d: u32| {
            updates.iter().find_map(|u| match u.change {
                AriChange::Inventory(i) if u.days.contains(day(d)) => i.total_rooms,
                _ => None,
            })
        };
        assert_eq!(rooms_on(19), Some(5), "a Saturday, like the 12th");
        assert_eq!(rooms_on(15), Some(6), "a Tuesday, from the latest night");
        let _ = RatePlanId::parse(1);
    }

    #[test]
    fn nothing_is_rolled_from_no_inventory_and_nothing_is_missing_past_the_horizon() {
        let range = StayDates::parse(day(14), day(21)).expect("range");
        assert!(roll_forward(room_type(), &Nights::new(), range).is_empty());
        assert_eq!(missing_range(day(20), day(1), day(21)), None);
        assert_eq!(
            missing_range(day(10), day(12), day(21)),
            StayDates::parse(day(12), day(21)).ok(),
            "never before today"
        );
    }
}
