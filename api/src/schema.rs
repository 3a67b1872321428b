//! Schemas of request fields the derive attributes cannot state alone, so that the
//! OpenAPI document describes exactly the requests the server accepts (a client
//! generated from it should send nothing the server refuses as invalid, and the
//! contract test, `tests/contract`, holds the two to that).
//!
//! Most rules are plain JSON Schema: a date is `format: date` and a pattern for the
//! years the server takes (1900 to 9999), a list of ids is bounded and unique. Rules
//! that relate two fields, which JSON Schema cannot say, are stated in words in the
//! field's description and in one of five vendor keywords a generator can follow:
//!
//! - `x-days-after: {"field": "start_date", "minimum": 1, "maximum": 30}`: this date is
//!   that many days after the date in `field` (a range of 1 to 30 nights);
//! - `x-days-from-today: {"minimum": 0, "maximum": 730}`: this date is that many days
//!   from today at the hotel (in its timezone);
//! - `x-not-above: "max_occupancy"`: this number is not above that field's; a field left
//!   out (or `null`) counts as its `default`, and without one the rule does not apply;
//! - `x-exactly-one-of: ["email", "guest_id"]` (on query parameters): exactly one of
//!   them is given;
//! - `x-unique-by: "room_type_id"` (on an array of objects): no two items have the same
//!   value of that field.

use serde_json::json;
use utoipa::openapi::extensions::ExtensionsBuilder;
use utoipa::openapi::schema::{
    AdditionalProperties, AllOfBuilder, AnyOfBuilder, ArrayBuilder, KnownFormat, ObjectBuilder,
    OneOfBuilder, SchemaFormat, SchemaType, Type,
};
use utoipa::openapi::{RefOr, Schema};
use utoipa::PartialSchema;

use aggregates::{BookingLimits, Weekdays};

use app::commands::MAX_ARI_UPDATES;

/// `YYYY-MM-DD` with a year from 1900 to 9999 (`format: date` says the day exists).
pub const DATE_PATTERN: &str = r"^(19[0-9]{2}|[2-9][0-9]{3})-[0-9]{2}-[0-9]{2}$";

/// Text of 1 to `max` characters with one that is not a space, and no control
/// characters (what the server's `trim`-then-count rule for names accepts).
pub const PRINTABLE_PATTERN: &str = r"^[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*$";

fn date_object(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Date)))
        .pattern(Some(DATE_PATTERN))
        .description(Some(description))
}

fn days_after(description: &str, maximum: u32) -> ObjectBuilder {
    days_after_field(description, "start_date", maximum)
}

fn days_after_field(description: &str, field: &str, maximum: u32) -> ObjectBuilder {
    date_object(description).extensions(Some(
        ExtensionsBuilder::new()
            .add(
                "x-days-after",
                json!({"field": field, "minimum": 1, "maximum": maximum}),
            )
            .build(),
    ))
}

/// The end of the turnaway report's range (`to`, after `from`): 1 to 400 nights on.
pub fn turnaways_to() -> ObjectBuilder {
    let nights = super::params::MAX_OCCUPANCY_NIGHTS;
    days_after_field(
        &format!(
            "The night after the last one reported: the range is [from, to), 1 to {nights} nights."
        ),
        "from",
        nights,
    )
}

/// A date: `YYYY-MM-DD`, a day that exists, years 1900 to 9999.
pub fn date() -> ObjectBuilder {
    date_object("A date, YYYY-MM-DD (years 1900 to 9999).")
}

/// The first night of a range.
pub fn start_date() -> ObjectBuilder {
    date_object("First night, YYYY-MM-DD (years 1900 to 9999).")
}

/// The first night of a stay to book: from today to 730 days on, at the hotel.
pub fn stay_start_date() -> ObjectBuilder {
    let limits = BookingLimits::default();
    date_object(&format!(
        "First night of the stay, YYYY-MM-DD: not in the past and at most {} days ahead, both counted in the hotel's timezone.",
        limits.max_days_ahead
    ))
    .extensions(Some(
        ExtensionsBuilder::new()
            .add(
                "x-days-from-today",
                json!({"minimum": 0, "maximum": limits.max_days_ahead}),
            )
            .build(),
    ))
}

/// The check-out day of a stay to book or ask about: 1 to 30 nights after its start.
pub fn stay_end_date() -> ObjectBuilder {
    let nights = BookingLimits::default().max_nights;
    days_after(
        &format!("Check-out day: the stay is [start_date, end_date), 1 to {nights} nights."),
        nights,
    )
}

/// The end of an inventory, rate or restriction range: 1 to 800 nights on.
pub fn update_end_date() -> ObjectBuilder {
    // The server's own default: the document describes a server as it starts.
    let nights = app::commands::WriteConfig::default().max_inventory_nights;
    days_after(
        &format!("The night after the last one set: the range is [start_date, end_date), 1 to {nights} nights."),
        nights,
    )
}

/// The day after a group block's last night: 1 to 90 nights after its start.
pub fn block_end_date() -> ObjectBuilder {
    days_after(
        "The day after the block's last night: its nights are [start_date, end_date), 1 to 90.",
        90,
    )
}

/// A group block's release date: not ended at the hotel, and before its `end_date`.
pub fn block_release_date() -> ObjectBuilder {
    let limits = BookingLimits::default();
    date_object(
        "At the end of this day (hotel time) the unpicked rooms go back to general sale: not yet ended there, and before end_date.",
    )
    .extensions(Some(
        ExtensionsBuilder::new()
            .add(
                "x-days-from-today",
                json!({"minimum": 0, "maximum": limits.max_days_ahead}),
            )
            .add("x-days-before", json!({"field": "end_date", "minimum": 1}))
            .build(),
    ))
}

/// The end of a report's range: 1 to 400 nights on.
pub fn report_end_date() -> ObjectBuilder {
    let nights = super::params::MAX_OCCUPANCY_NIGHTS;
    days_after(
        &format!("The night after the last one reported: the range is [start_date, end_date), 1 to {nights} nights."),
        nights,
    )
}

/// The end of a calendar's range: 1 to 92 nights on.
pub fn calendar_end_date() -> ObjectBuilder {
    let nights = app::queries::MAX_CALENDAR_NIGHTS;
    days_after(
        &format!("The night after the last one shown: the range is [start_date, end_date), 1 to {nights} nights."),
        nights,
    )
}

/// Days of the week an update applies to: 1 to 7 distinct names, or `null` (every
/// day). The server also takes the names in capitals.
pub fn days() -> ArrayBuilder {
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(Weekdays::NAMES)),
        )
        .min_items(Some(1))
        .max_items(Some(Weekdays::NAMES.len()))
        .unique_items(true)
        .description(Some(
            "Only the nights on these days of the week (each once; case-insensitive); absent or null: every night.",
        ))
        .examples([json!(["fri", "sat"])])
}

/// A positive id a caller chooses (`HotelId`'s rule: 1 to 2^53 - 1).
fn client_id() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(1))
        .maximum(Some(9_007_199_254_740_991_i64))
}

/// The room types a rate plan sells: 1 to 200 distinct ids.
pub fn room_type_ids() -> ArrayBuilder {
    ArrayBuilder::new()
        .items(client_id())
        .min_items(Some(1))
        .max_items(Some(200))
        .unique_items(true)
        .description(Some(
            "The room types the plan sells: 1 to 200, each once, each a room type of the hotel.",
        ))
        .examples([json!([1, 2])])
}

/// A rate plan's cancellation policy as a client sends it: non-refundable (no refund
/// windows), or refundable with windows where partial ones come no earlier than full
/// ones (each left out takes the house policy's).
pub fn cancellation_policy() -> RefOr<Schema> {
    let hours = |default: u32, example: u32| {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(0))
            .maximum(Some(8784))
            .default(Some(json!(default)))
            .examples([json!(example)])
    };
    let null = || ObjectBuilder::new().schema_type(Type::Null);
    let non_refundable = ObjectBuilder::new()
        .title(Some("non-refundable"))
        .description(Some(
            "A guest's cancellation refunds nothing; no refund windows.",
        ))
        .property(
            "refundable",
            ObjectBuilder::new()
                .schema_type(Type::Boolean)
                .enum_values(Some([false])),
        )
        .required("refundable")
        .property("full_refund_hours", null())
        .property("partial_refund_hours", null())
        .property("partial_refund_percent", null())
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    let refundable = ObjectBuilder::new()
        .title(Some("refundable"))
        .description(Some(
            "All of the payment back at `full_refund_hours` or more before check-in, `partial_refund_percent` of it at `partial_refund_hours` or more; a window left out takes the house policy's (72, 24, 50).",
        ))
        .property(
            "refundable",
            ObjectBuilder::new()
                .schema_type(Type::Boolean)
                .enum_values(Some([true])),
        )
        .required("refundable")
        .property(
            "full_refund_hours",
            hours(72, 72).schema_type(SchemaType::from_iter([Type::Integer, Type::Null])),
        )
        .property(
            "partial_refund_hours",
            hours(24, 24)
                .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
                .description(Some("Not more than `full_refund_hours`."))
                .extensions(Some(
                    ExtensionsBuilder::new()
                        .add("x-not-above", "full_refund_hours")
                        .build(),
                )),
        )
        .property(
            "partial_refund_percent",
            ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                .minimum(Some(0))
                .maximum(Some(100))
                .default(Some(json!(50)))
                .examples([json!(50)]),
        )
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    OneOfBuilder::new()
        .item(null())
        .item(non_refundable)
        .item(refundable)
        .description(Some(
            "Absent or null: the house policy (refundable: all back at 72 hours or more before check-in, half at 24 hours or more).",
        ))
        .into()
}

/// `PUT .../restrictions`: a range, its days, and at least one restriction to set
/// (`null` clears one), for every plan or one.
pub fn put_restrictions() -> RefOr<Schema> {
    let object = restriction_fields(
        ObjectBuilder::new()
            .property("start_date", start_date())
            .required("start_date")
            .property("end_date", update_end_date())
            .required("end_date")
            .property("days", days()),
    );
    AllOfBuilder::new()
        .item(object)
        .item(at_least_one_restriction())
        .description(Some(
            "Restrictions to set on every night of a range: a restriction left out keeps its value, `null` clears it; at least one must be given.",
        ))
        .examples([json!({
            "start_date": "2027-06-01", "end_date": "2027-06-08",
            "days": ["fri", "sat"], "min_stay": 2
        })])
        .into()
}

/// The restrictions of a range in a bulk update (`AriRange.restrictions`): as
/// [`put_restrictions`] takes them, without the range.
pub fn ari_restrictions() -> RefOr<Schema> {
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .item(
            AllOfBuilder::new()
                .item(restriction_fields(ObjectBuilder::new()).additional_properties(Some(AdditionalProperties::FreeForm(false))))
                .item(at_least_one_restriction()),
        )
        .description(Some(
            "Restrictions to set (a field left out keeps its value, `null` clears it; at least one must be given); absent or null: none.",
        ))
        .into()
}

/// The restriction fields, as both bodies take them.
fn restriction_fields(object: ObjectBuilder) -> ObjectBuilder {
    let days = |minimum: i64, description: &str| {
        ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(minimum))
            .maximum(Some(aggregates::restrictions::MAX_RESTRICTION_DAYS))
            .description(Some(description))
    };
    let not_above = |field: &str| {
        Some(
            ExtensionsBuilder::new()
                .add("x-not-above", field.to_owned())
                .build(),
        )
    };
    let flag = |description: &str| {
        ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([Type::Boolean, Type::Null]))
            .description(Some(description))
    };
    object
        .property(
            "rate_plan_id",
            client_id()
                .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
                .description(Some(
                    "The plan the restrictions are for; `null` or absent: every plan of the room type.",
                )),
        )
        .property(
            "min_stay",
            days(1, "Stays arriving on the night last at least this many nights; not above `max_stay` when both are given.")
                .examples([json!(2)])
                .extensions(not_above("max_stay")),
        )
        .property(
            "max_stay",
            days(1, "Stays arriving on the night last at most this many nights.")
                .examples([json!(14)]),
        )
        .property(
            "min_stay_through",
            days(1, "Every stay including the night lasts at least this many nights."),
        )
        .property("closed_to_arrival", flag("No stay may start on the night."))
        .property(
            "closed_to_departure",
            flag("No stay may end on this date (`end_date` equal to it)."),
        )
        .property("stop_sell", flag("The night is not sold at all."))
        .property(
            "min_advance_days",
            days(0, "Stays arriving on the night are booked at least this many days ahead; not above `max_advance_days` when both are given.")
                .extensions(not_above("max_advance_days")),
        )
        .property(
            "max_advance_days",
            days(0, "Stays arriving on the night are booked at most this many days ahead."),
        )
}

/// The restriction fields, of which a request gives at least one (`null` counts: it
/// clears that restriction).
const RESTRICTIONS: [&str; 8] = [
    "min_stay",
    "max_stay",
    "min_stay_through",
    "closed_to_arrival",
    "closed_to_departure",
    "stop_sell",
    "min_advance_days",
    "max_advance_days",
];

fn at_least_one_restriction() -> AnyOfBuilder {
    RESTRICTIONS.iter().fold(AnyOfBuilder::new(), |any, field| {
        any.item(ObjectBuilder::new().required(*field))
    })
}

/// A bulk update's ranges: 1 to 1000.
pub fn ari_updates() -> ArrayBuilder {
    ArrayBuilder::new()
        .items(ari_range())
        .min_items(Some(1))
        .max_items(Some(MAX_ARI_UPDATES))
        .description(Some(
            "1 to 1000 ranges, applied in order, each on the state the earlier ones leave; all or none.",
        ))
}

/// One range of a bulk update and what it sets on each of its nights (inventory,
/// restrictions, plan rates, in that order): at least one of them.
fn ari_range() -> AllOfBuilder {
    let object = ObjectBuilder::new()
        .property("room_type_id", client_id())
        .required("room_type_id")
        .property("start_date", start_date())
        .required("start_date")
        .property("end_date", update_end_date())
        .required("end_date")
        .property("days", days())
        .property(
            "inventory",
            OneOfBuilder::new()
                .item(ObjectBuilder::new().schema_type(Type::Null))
                .item(<super::bodies::AriInventory as PartialSchema>::schema()),
        )
        .property("restrictions", ari_restrictions())
        .property(
            "rates",
            ArrayBuilder::new()
                .items(<super::bodies::AriRate as PartialSchema>::schema())
                .description(Some("Plans' own rates to set; absent: none.")),
        )
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    let sets = AnyOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .required("inventory")
                .property("inventory", ObjectBuilder::new()),
        )
        .item(
            ObjectBuilder::new()
                .required("restrictions")
                .property("restrictions", ObjectBuilder::new()),
        )
        .item(
            ObjectBuilder::new()
                .required("rates")
                .property("rates", ArrayBuilder::new().min_items(Some(1))),
        );
    AllOfBuilder::new()
        .item(object)
        .item(sets)
        .description(Some(
            "One range of a bulk update, and what it sets on each of its nights (in this order: inventory, restrictions, plan rates); at least one of the three.",
        ))
}

/// Guests the rate covers: 1 to 50, not above `max_occupancy`.
pub fn base_occupancy() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(1))
        .maximum(Some(50))
        .description(Some(
            "Guests the rate covers: 1 to `max_occupancy` (absent or null: `max_occupancy`).",
        ))
        .examples([json!(2)])
        .extensions(Some(
            ExtensionsBuilder::new()
                .add("x-not-above", "max_occupancy")
                .build(),
        ))
}

/// An IANA timezone name, exactly as the server knows them (case matters).
pub fn timezone() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(aggregates::TimeZone::names()))
        .description(Some("IANA timezone name."))
        .examples([json!("Europe/Lisbon")])
}

/// An ISO 4217 currency code the server prices in (one with a minor unit).
pub fn currency() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(aggregates::Currency::codes()))
        .description(Some("ISO 4217 code with a minor unit."))
        .examples([json!("EUR")])
}

/// A tax's code: 1 to 10 of `A-Z`, `0-9` and `-`, distinct within the hotel.
pub fn tax_code() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(10))
        .pattern(Some("^[A-Z0-9-]{1,10}$"))
        .examples([json!("CITY")])
}

/// A reservation status to filter by.
pub fn reservation_status() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(
            aggregates::ReservationStatus::ALL
                .iter()
                .map(|s| s.as_str()),
        ))
}

/// A staff member's role.
pub fn staff_role() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(app::staff::StaffRole::ALL.iter().map(|r| r.as_str())))
        .examples(["revenue"])
}

/// The one state the outbox listing filters by.
pub fn outbox_state() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["failed"]))
}

/// An e-mail address as the server takes one (`Guest::parse`): one `@`, a domain with
/// a dot inside it, no spaces or control characters, at most 254 characters.
pub const EMAIL_PATTERN: &str = r"^[^@\s\u0000-\u001F\u007F-\u009F]+@[^@\s.\u0000-\u001F\u007F-\u009F][^@\s\u0000-\u001F\u007F-\u009F]*\.[^@\s\u0000-\u001F\u007F-\u009F]*[^@\s.\u0000-\u001F\u007F-\u009F]$";

/// `g_` and 32 lower-case hex digits (`GuestId::parse`).
const GUEST_ID_PATTERN: &str = "^g_[0-9a-f]{32}$";

fn exactly_one_of_guest() -> Option<utoipa::openapi::extensions::Extensions> {
    Some(
        ExtensionsBuilder::new()
            .add("x-exactly-one-of", json!(["email", "guest_id"]))
            .build(),
    )
}

/// The `email` query parameter of a guest look-up.
pub fn guest_email() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .max_length(Some(254))
        .pattern(Some(EMAIL_PATTERN))
        .examples([json!("ana@example.com")])
        .extensions(exactly_one_of_guest())
}

/// The `guest_id` query parameter of a guest look-up.
pub fn guest_id() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(GUEST_ID_PATTERN))
        .examples([json!("g_0123456789abcdef0123456789abcdef")])
        .extensions(exactly_one_of_guest())
}

/// Whom an erasure is about, as a body: `email` or `guest_id`, not both.
pub fn guest_query() -> RefOr<Schema> {
    let null = || ObjectBuilder::new().schema_type(Type::Null);
    let by_email = ObjectBuilder::new()
        .title(Some("by e-mail"))
        .property(
            "email",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(Some(254))
                .pattern(Some(EMAIL_PATTERN))
                .description(Some("The guest's e-mail (case-insensitive).")),
        )
        .required("email")
        .property("guest_id", null());
    let by_id = ObjectBuilder::new()
        .title(Some("by id"))
        .property(
            "guest_id",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(GUEST_ID_PATTERN))
                .description(Some(
                    "The guest's id, as an export or an erasure answered it.",
                )),
        )
        .required("guest_id")
        .property("email", null());
    OneOfBuilder::new()
        .item(by_email)
        .item(by_id)
        .description(Some(
            "Whom the request is about: exactly one of `email` and `guest_id`.",
        ))
        .examples([json!({"email": "ana@example.com"})])
        .into()
}

/// A subscription's event types: 1 to 11 of the known ones, or `"*"` for all.
pub fn webhook_events() -> ArrayBuilder {
    let known = app::webhooks::EVENT_TYPES;
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(known.iter().copied().chain(["*"]))),
        )
        .min_items(Some(1))
        .max_items(Some(known.len() + 1))
        .description(Some(
            "Event types (`reservation.held`, `.confirmed`, `.cancelled`, `.expired`, `.declined`, `.dates_changed`, `.checked_in`, `.checked_out`, `.no_show`, `inventory.changed`, `block.created`, `.changed`, `.released`), or `[\"*\"]` for all; 1 to 14 entries.",
        ))
        .examples([json!(["reservation.confirmed", "inventory.changed"])])
}

/// A subscription's hotels: 1 to 1000 positive ids, or `null` (every hotel).
pub fn webhook_hotel_ids() -> ArrayBuilder {
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                .minimum(Some(1)),
        )
        .min_items(Some(1))
        .max_items(Some(1000))
        .description(Some(
            "Only these hotels' events (1 to 1000 ids); absent or null: every hotel.",
        ))
}

/// A reservation's `lines`: 1 to 4, each a different room type.
pub fn reservation_lines() -> ArrayBuilder {
    ArrayBuilder::new()
        .items(<super::reservations::LineIn as PartialSchema>::schema())
        .min_items(Some(1))
        .max_items(Some(super::reservations::MAX_LINES))
        .description(Some(
            "Several room types for the same stay, instead of `room_type_id`, `rooms`, `guests` and `rate_plan_id`: 1 to 4 lines, each a different room type. All are held or none.",
        ))
        .extensions(Some(
            ExtensionsBuilder::new()
                .add("x-unique-by", "room_type_id")
                .build(),
        ))
}

/// A hold names one room type (`room_type_id`, with `rooms`, `guests` and
/// `rate_plan_id` if it wants) or `lines`, never both: a rule between fields the
/// derived schema of the body cannot state, added to it (see `lib.rs`). Exactly one of
/// the two shapes: the other's fields absent (or `null`, which is absent).
/// A booking from a group block is priced at the block's rate: `block_code` and
/// `rate_plan_id` are never both given (either may be absent or null).
pub fn no_plan_with_block() -> utoipa::openapi::schema::AnyOfBuilder {
    let absent = |field: &str| {
        ObjectBuilder::new().property(field, ObjectBuilder::new().schema_type(Type::Null))
    };
    utoipa::openapi::schema::AnyOfBuilder::new()
        .item(absent("block_code"))
        .item(absent("rate_plan_id"))
}

pub fn one_room_type_or_lines() -> OneOfBuilder {
    let null = || ObjectBuilder::new().schema_type(Type::Null);
    // `required` only asks for the key: a `null` is absent to the server, so each shape
    // also says its own field is not null.
    let lines_shape = ["room_type_id", "rooms", "guests", "rate_plan_id"]
        .iter()
        .fold(
            ObjectBuilder::new()
                .required("lines")
                .property("lines", ArrayBuilder::new()),
            |object, field| object.property(*field, null()),
        );
    OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .required("room_type_id")
                .property(
                    "room_type_id",
                    ObjectBuilder::new().schema_type(Type::Integer),
                )
                .property("lines", null()),
        )
        .item(lines_shape)
}

/// A what-if's policy: exactly one of an allowance and a walk risk.
pub fn what_if_policy() -> RefOr<Schema> {
    let allowance = ObjectBuilder::new()
        .property(
            "overbooking_allowance",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                .minimum(Some(0))
                .maximum(Some(10_000))
                .description(Some("The same overbooking allowance on every night.")),
        )
        .required("overbooking_allowance")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    let risk = ObjectBuilder::new()
        .property(
            "suggested_risk",
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Double)))
                .exclusive_minimum(Some(0))
                .exclusive_maximum(Some(1))
                .description(Some(
                    "The allowance the no-show report suggests for this walk risk: the largest whose chance of walking a guest on a full night stays at or under it, from the range's own no-shows.",
                )),
        )
        .required("suggested_risk")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    OneOfBuilder::new()
        .item(allowance)
        .item(risk)
        .description(Some(
            "The policy to replay under: exactly one of `overbooking_allowance` and `suggested_risk`.",
        ))
        .examples([json!({"overbooking_allowance": 3})])
        .into()
}
