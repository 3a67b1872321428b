//! A small demo catalog so a newcomer can try the API at once: hotels in Lisbon, Porto
//! and Paris pricing in euros and one in Zurich in Swiss francs, their room types, their
//! taxes (Lisbon's and Zurich's), and 365 nights of inventory with weekend rates.
//! Loading it twice changes nothing (catalog and inventory writes are idempotent).

use aggregates::booking::InventoryUpdate;
use aggregates::taxes::{BasisPoints, Tax, TaxKind, Taxes};
use aggregates::types::local_date;
use aggregates::{Cents, Currency, HotelDetails, HotelId, RoomTypeDetails, RoomTypeId, StayDates};
use chrono::{Datelike, Days, Weekday};

use crate::commands::{Caller, CommandService};

struct DemoRoomType {
    id: i64,
    name: &'static str,
    max_occupancy: i64,
    rooms: i64,
    allowance: i64,
    rate_cents: i64,
}

struct DemoHotel {
    id: i64,
    name: &'static str,
    city: &'static str,
    timezone: &'static str,
    currency: &'static str,
    room_types: &'static [DemoRoomType],
}

const HOTELS: &[DemoHotel] = &[
    DemoHotel {
        id: 812,
        name: "Hotel Tejo",
        city: "Lisbon",
        timezone: "Europe/Lisbon",
        currency: "EUR",
        room_types: &[
            DemoRoomType {
                id: 1,
                name: "double",
                max_occupancy: 2,
                rooms: 40,
                allowance: 2,
                rate_cents: 12_000,
            },
            DemoRoomType {
                id: 2,
                name: "twin",
                max_occupancy: 2,
                rooms: 30,
                allowance: 0,
                rate_cents: 11_000,
            },
            DemoRoomType {
                id: 3,
                name: "king",
                max_occupancy: 2,
                rooms: 20,
                allowance: 1,
                rate_cents: 18_000,
            },
        ],
    },
    DemoHotel {
        id: 813,
        name: "Casa do Porto",
        city: "Porto",
        timezone: "Europe/Lisbon",
        currency: "EUR",
        room_types: &[
            DemoRoomType {
                id: 1,
                name: "double",
                max_occupancy: 2,
                rooms: 25,
                allowance: 1,
                rate_cents: 9_500,
            },
            DemoRoomType {
                id: 2,
                name: "suite",
                max_occupancy: 4,
                rooms: 5,
                allowance: 0,
                rate_cents: 25_000,
            },
        ],
    },
    DemoHotel {
        id: 901,
        name: "Hôtel des Arts",
        city: "Paris",
        timezone: "Europe/Paris",
        currency: "EUR",
        room_types: &[
            DemoRoomType {
                id: 1,
                name: "queen",
                max_occupancy: 2,
                rooms: 30,
                allowance: 2,
                rate_cents: 21_000,
            },
            DemoRoomType {
                id: 2,
                name: "king",
                max_occupancy: 2,
                rooms: 10,
                allowance: 0,
                rate_cents: 28_000,
            },
        ],
    },
    DemoHotel {
        id: 950,
        name: "Hotel Limmat",
        city: "Zurich",
        timezone: "Europe/Zurich",
        currency: "CHF",
        room_types: &[DemoRoomType {
            id: 1,
            name: "double",
            max_occupancy: 2,
            rooms: 20,
            allowance: 0,
            rate_cents: 24_000,
        }],
    },
];

/// The demo's taxes: Lisbon's VAT on lodging (6%, in the price) and city tax (2.00 per
/// guest and night, at most 7 nights); Zurich's VAT on lodging (3.8%, in the price) and
/// city tax (2.50 per guest and night). The others have none.
fn demo_taxes(hotel_id: i64) -> anyhow::Result<Taxes> {
    let vat = |percent| -> anyhow::Result<Tax> {
        Ok(Tax::parse(
            "VAT",
            TaxKind::Percent {
                rate: BasisPoints::from_percent(percent)?,
                included: true,
            },
        )?)
    };
    let city = |cents, max_nights| {
        Tax::parse(
            "CITY",
            TaxKind::PerPersonNight {
                amount: Cents::new(cents),
                max_nights,
            },
        )
    };
    Ok(match hotel_id {
        812 | 813 => Taxes::parse(vec![vat(6.0)?, city(200, Some(7))?])?,
        950 => Taxes::parse(vec![vat(3.8)?, city(250, None)?])?,
        _ => Taxes::default(),
    })
}

/// Number of nights of inventory the demo sets, from today at each hotel.
pub const DEMO_NIGHTS: u64 = 365;

/// Loads the demo catalog; returns the number of room-nights set.
pub async fn seed(commands: &CommandService) -> anyhow::Result<u64> {
    let mut nights_set = 0;
    let by = Caller::Staff(String::from("demo"));
    for hotel in HOTELS {
        let hotel_id = HotelId::parse(hotel.id)?;
        let details = HotelDetails::parse(hotel.name, hotel.city, hotel.timezone)?;
        let timezone = details.timezone();
        let currency = Currency::parse(hotel.currency)?;
        commands
            .set_hotel(&by, hotel_id, details, Some(currency))
            .await?;
        commands
            .set_taxes(&by, hotel_id, demo_taxes(hotel.id)?)
            .await?;
        let today = local_date(commands.now(), timezone);
        let last = today
            .checked_add_days(Days::new(DEMO_NIGHTS))
            .ok_or_else(|| anyhow::anyhow!("date out of range"))?;
        for room_type in hotel.room_types {
            let room_type_id = RoomTypeId::parse(room_type.id)?;
            commands
                .set_room_type(
                    &by,
                    hotel_id,
                    room_type_id,
                    RoomTypeDetails::parse(room_type.name, room_type.max_occupancy)?,
                )
                .await?;
            let base = InventoryUpdate {
                total_rooms: Some(room_type.rooms),
                overbooking_allowance: Some(room_type.allowance),
                rate_cents: Some(Cents::new(room_type.rate_cents)),
            };
            nights_set += u64::from(
                commands
                    .set_inventory(
                        &by,
                        hotel_id,
                        room_type_id,
                        StayDates::parse(today, last)?,
                        base,
                    )
                    .await?,
            );
            // Friday and Saturday nights cost a quarter more.
            let weekend = InventoryUpdate {
                rate_cents: Some(Cents::new(room_type.rate_cents * 5 / 4)),
                ..base
            };
            for night in today.iter_days().take_while(|d| *d < last) {
                if matches!(night.weekday(), Weekday::Fri | Weekday::Sat) {
                    let next = night
                        .succ_opt()
                        .ok_or_else(|| anyhow::anyhow!("date out of range"))?;
                    commands
                        .set_inventory(
                            &by,
                            hotel_id,
                            room_type_id,
                            StayDates::parse(night, next)?,
                            weekend,
                        )
                        .await?;
                }
            }
        }
    }
    Ok(nights_set)
}
