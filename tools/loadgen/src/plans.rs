//! The rate plans and restrictions of the issue-18 catalogs, in one place: `setup --plans`
//! creates them, `run spread-plans` and `run search` check the prices the server answers
//! against them, and `ari` sends a year of them as bulk updates.
//!
//! Every hotel gets three plans selling all its room types: plan 1 priced on its own
//! (refundable, its own rate on every night), plan 2 derived from it at -10%
//! (non-refundable) and plan 3 derived from it at +15% (refundable).

use chrono::{Datelike, Days, NaiveDate, Weekday};
use clap::ValueEnum;
use serde_json::{json, Value};

/// The plans: (id, name, refundable, derived from plan 1 at this percent).
pub const PLANS: [(i64, &str, bool, Option<i64>); 3] = [
    (1, "Flexible", true, None),
    (2, "Non-refundable", false, Some(-10)),
    (3, "Flexible plus breakfast", true, Some(15)),
];

/// The plan the `spread-plans` holds name: the derived, non-refundable one.
pub const HOLD_PLAN: i64 = 2;

/// Limits of one `PUT /v1/hotels/{h}/ari` (the server's `MAX_ARI_UPDATES`,
/// `MAX_ARI_NIGHTS` and `max_inventory_nights`): ranges, nights over all ranges (each
/// change of a range counts its nights: inventory, restrictions and every rate), and
/// nights of one range.
pub const MAX_RANGES: usize = 1_000;
pub const MAX_NIGHTS: u64 = 40_000;
pub const MAX_RANGE_NIGHTS: u64 = 800;

/// Which restrictions `setup --plans` puts in force.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum PlanSet {
    /// Restrictions every generated 3-night stay satisfies, so holds naming a plan are
    /// really decided and take the rooms: for every plan `max_stay` 14,
    /// `min_advance_days` 0 and `max_advance_days` 400 on every night, closed to
    /// departure on the first three dates (no stay ends there) and closed to arrival on
    /// the last two nights (no stay starts there); for plan 2 `min_stay` 2 on every night.
    Spread,
    /// As `spread`, and some that hide offers from a search: plan 3 closed to arrival
    /// on Sundays, and room type 3 of even hotels stopped on Saturdays (every plan).
    Search,
}

/// The plan bodies for `PUT /v1/hotels/{h}/rate-plans/{p}`, parents first.
pub fn plan_bodies(room_types: i64) -> Vec<(i64, Value)> {
    let room_type_ids: Vec<i64> = (1..=room_types).collect();
    PLANS
        .iter()
        .map(|&(id, name, refundable, derived)| {
            let mut body = json!({
                "name": name,
                "room_type_ids": room_type_ids,
                "cancellation_policy": {"refundable": refundable},
            });
            if let Some(adjust) = derived {
                body["derived_from"] = json!({"rate_plan_id": 1, "adjust_percent": adjust});
            }
            (id, body)
        })
        .collect()
}

/// A plan's price for a night whose plan 1 rate is `plan_rate_cents`: the server's rule,
/// the parent's price times `(100 + adjust) / 100`, to the nearest cent, halves up.
pub fn night_price(plan: i64, plan_rate_cents: i64) -> Option<i64> {
    let &(_, _, _, derived) = PLANS.iter().find(|p| p.0 == plan)?;
    Some(match derived {
        None => plan_rate_cents,
        Some(adjust) => (plan_rate_cents * (100 + adjust) + 50).div_euclid(100),
    })
}

/// What every night of a catalog gets: its rooms, base rate and plan 1's rate over
/// `[first, last)`.
#[derive(Clone, Copy, Debug)]
pub struct Nights {
    pub first: NaiveDate,
    pub last: NaiveDate,
    pub rooms: i64,
    pub rate_cents: i64,
    pub plan_rate_cents: i64,
}

/// The bulk ARI ranges `setup --plans` sends for one room type of `hotel`: inventory,
/// plan 1's rate and the restrictions of `set` over the catalog's nights.
pub fn setup_ranges(set: PlanSet, hotel: i64, room_type: i64, nights: &Nights) -> Vec<Value> {
    let Nights {
        first,
        last,
        rooms,
        rate_cents,
        plan_rate_cents,
    } = *nights;
    let day = |offset: u64| first.checked_add_days(Days::new(offset)).unwrap_or(last);
    let before_last = last.checked_sub_days(Days::new(2)).unwrap_or(first);
    let mut ranges = vec![
        json!({"room_type_id": room_type, "start_date": first, "end_date": last,
               "inventory": {"total_rooms": rooms, "overbooking_allowance": 0, "rate_cents": rate_cents},
               "restrictions": {"max_stay": 14, "min_advance_days": 0, "max_advance_days": 400},
               "rates": [{"rate_plan_id": 1, "rate_cents": plan_rate_cents}]}),
        json!({"room_type_id": room_type, "start_date": first, "end_date": last,
               "restrictions": {"rate_plan_id": HOLD_PLAN, "min_stay": 2}}),
        json!({"room_type_id": room_type, "start_date": first, "end_date": day(3),
               "restrictions": {"closed_to_departure": true}}),
        json!({"room_type_id": room_type, "start_date": before_last, "end_date": last,
               "restrictions": {"closed_to_arrival": true}}),
    ];
    if set == PlanSet::Search {
        ranges.push(
            json!({"room_type_id": room_type, "start_date": first, "end_date": last,
            "days": ["sun"], "restrictions": {"rate_plan_id": 3, "closed_to_arrival": true}}),
        );
        if room_type == 3 && hotel % 2 == 0 {
            ranges.push(
                json!({"room_type_id": room_type, "start_date": first, "end_date": last,
                "days": ["sat"], "restrictions": {"stop_sell": true}}),
            );
        }
    }
    ranges
}

/// What the server counts of a range against `MAX_NIGHTS`: its nights (those on its
/// days) once per change it carries.
pub fn counted_nights(range: &Value) -> u64 {
    let date = |key: &str| {
        range
            .get(key)
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<NaiveDate>().ok())
    };
    let (Some(start), Some(end)) = (date("start_date"), date("end_date")) else {
        return 0;
    };
    let days: Option<Vec<&str>> = range
        .get("days")
        .and_then(Value::as_array)
        .map(|d| d.iter().filter_map(Value::as_str).collect());
    let nights = start
        .iter_days()
        .take_while(|d| *d < end)
        .filter(|d| {
            days.as_ref()
                .is_none_or(|days| days.contains(&weekday_name(d.weekday())))
        })
        .count() as u64;
    let changes = u64::from(range.get("inventory").is_some())
        + u64::from(range.get("restrictions").is_some())
        + range
            .get("rates")
            .and_then(Value::as_array)
            .map_or(0, |r| r.len() as u64);
    nights * changes
}

fn weekday_name(day: Weekday) -> &'static str {
    match day {
        Weekday::Mon => "mon",
        Weekday::Tue => "tue",
        Weekday::Wed => "wed",
        Weekday::Thu => "thu",
        Weekday::Fri => "fri",
        Weekday::Sat => "sat",
        Weekday::Sun => "sun",
    }
}

/// Ranges in as few bulk requests as the limits allow, in order (a range never moves
/// before one listed earlier, so inventory still comes before what needs it).
pub fn pack(ranges: Vec<Value>) -> Vec<Vec<Value>> {
    let mut requests: Vec<Vec<Value>> = Vec::new();
    let mut nights = 0;
    for range in ranges {
        let n = counted_nights(&range);
        let fits = requests
            .last()
            .is_some_and(|r| r.len() < MAX_RANGES && nights + n <= MAX_NIGHTS);
        if !fits {
            requests.push(Vec::new());
            nights = 0;
        }
        nights += n;
        if let Some(request) = requests.last_mut() {
            request.push(range);
        }
    }
    requests
}

/// A year (or `nights`) of ARI for one room type, as a channel manager would send it:
/// inventory and plan 1's rate on every night, and weekend restrictions (every plan:
/// `min_stay` 2 and `max_stay` 14 on Fridays and Saturdays), ranges of at most
/// `MAX_RANGE_NIGHTS` nights.
pub fn year_ranges(
    room_type: i64,
    first: NaiveDate,
    nights: u64,
    rooms: i64,
    rate_cents: i64,
    plan_rate_cents: i64,
) -> Vec<Value> {
    let mut full = Vec::new();
    let mut weekends = Vec::new();
    let mut offset = 0;
    while offset < nights {
        let len = (nights - offset).min(MAX_RANGE_NIGHTS);
        let (Some(start), Some(end)) = (
            first.checked_add_days(Days::new(offset)),
            first.checked_add_days(Days::new(offset + len)),
        ) else {
            break;
        };
        full.push(json!({"room_type_id": room_type, "start_date": start, "end_date": end,
            "inventory": {"total_rooms": rooms, "overbooking_allowance": 0, "rate_cents": rate_cents},
            "rates": [{"rate_plan_id": 1, "rate_cents": plan_rate_cents}]}));
        weekends.push(
            json!({"room_type_id": room_type, "start_date": start, "end_date": end,
            "days": ["fri", "sat"], "restrictions": {"min_stay": 2, "max_stay": 14}}),
        );
        offset += len;
    }
    full.extend(weekends);
    full
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_follow_the_server_rule() {
        assert_eq!(night_price(1, 15_000), Some(15_000));
        assert_eq!(night_price(2, 15_000), Some(13_500));
        assert_eq!(night_price(3, 15_000), Some(17_250));
        // halves up
        assert_eq!(night_price(2, 15_005), Some(13_505));
        assert_eq!(night_price(3, 10_001), Some(11_501));
        assert_eq!(night_price(4, 15_000), None);
    }

    #[test]
    fn counts_nights_per_change_and_day() {
        let first = NaiveDate::from_ymd_opt(2027, 1, 4).expect("a Monday");
        let ranges = year_ranges(1, first, 14, 10, 100, 150);
        assert_eq!(ranges.len(), 2);
        assert_eq!(counted_nights(&ranges[0]), 28, "inventory and one rate");
        assert_eq!(counted_nights(&ranges[1]), 4, "two Fridays, two Saturdays");
    }

    #[test]
    fn a_year_of_five_room_types_is_one_request_and_ranges_stay_in_order() {
        let first = NaiveDate::from_ymd_opt(2027, 1, 4).expect("date");
        let ranges: Vec<Value> = (1..=5)
            .flat_map(|rt| year_ranges(rt, first, 365, 10, 100, 150))
            .collect();
        let requests = pack(ranges.clone());
        assert_eq!(requests.len(), 1);
        // 100 room types in one hotel: 365 * 2 + 104 nights each, 40,000 a request.
        let many: Vec<Value> = (1..=100)
            .flat_map(|rt| year_ranges(rt, first, 365, 10, 100, 150))
            .collect();
        let requests = pack(many.clone());
        assert_eq!(requests.len(), 3);
        assert!(requests
            .iter()
            .all(|r| r.iter().map(counted_nights).sum::<u64>() <= MAX_NIGHTS));
        let flat: Vec<Value> = requests.into_iter().flatten().collect();
        assert_eq!(flat, many);
        // A range longer than the limit is split.
        assert_eq!(year_ranges(1, first, 1_000, 10, 100, 150).len(), 4);
    }
}
