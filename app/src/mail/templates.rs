//! Rendering a guest's message from the templates in `templates/mail/` (compiled into
//! the server: it reads no file at run time). See that folder's README for the
//! conventions: the first line is the subject, the HTML body is the layout around the
//! text body's paragraphs.

use std::sync::OnceLock;

use aggregates::cancellation::CancellationPolicy;
use aggregates::{Cents, Currency, StayDates};
use minijinja::{context, Environment};

use store::write::mail::{MailFacts, MailKind};

/// The languages messages are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    English,
    Portuguese,
    French,
}

impl Language {
    fn code(self) -> &'static str {
        match self {
            Self::English => "en",
            Self::Portuguese => "pt",
            Self::French => "fr",
        }
    }

    /// The language of a hotel in `timezone` (an IANA name): a guess, but the one a
    /// hotel's own staff would make for a guest who booked in their country.
    pub fn of_timezone(timezone: &str) -> Self {
        const PORTUGUESE: [&str; 12] = [
            "Europe/Lisbon",
            "Atlantic/Madeira",
            "Atlantic/Azores",
            "America/Sao_Paulo",
            "America/Bahia",
            "America/Fortaleza",
            "America/Recife",
            "America/Belem",
            "America/Manaus",
            "Africa/Luanda",
            "Africa/Maputo",
            "Atlantic/Cape_Verde",
        ];
        const FRENCH: [&str; 8] = [
            "Europe/Paris",
            "Europe/Monaco",
            "Indian/Reunion",
            "America/Martinique",
            "America/Guadeloupe",
            "America/Cayenne",
            "Pacific/Tahiti",
            "Pacific/Noumea",
        ];
        if PORTUGUESE.contains(&timezone) {
            Self::Portuguese
        } else if FRENCH.contains(&timezone) {
            Self::French
        } else {
            Self::English
        }
    }
}

/// Everything a message says that is not in [`MailFacts`]: the names the catalog and
/// the guest give.
#[derive(Debug, Clone)]
pub struct Names<'a> {
    pub reference: String,
    pub guest_name: &'a str,
    pub hotel: &'a str,
    pub room_type: &'a str,
    /// The names of the room types beyond the first (`MailFacts::more_lines`), in order.
    pub more_room_types: &'a [String],
    pub language: Language,
}

/// The stay's room types as a message lists them: each with its name, rooms, guests per
/// room and cancellation policy, the first one first.
fn lines(facts: &MailFacts, names: &Names<'_>) -> Vec<minijinja::Value> {
    let first = context! {
        room_type => names.room_type,
        rooms => facts.rooms.get(),
        guests => facts.guests.get(),
        policy => Policy::from(facts.cancellation_policy).value(),
    };
    let more = facts.more_lines.iter().enumerate().map(|(i, line)| {
        let fallback = format!("room type {}", line.room_type_id);
        let name = names.more_room_types.get(i).cloned().unwrap_or(fallback);
        context! {
            room_type => name,
            rooms => line.rooms.get(),
            guests => line.guests.get(),
            policy => Policy::from(line.cancellation_policy).value(),
        }
    });
    std::iter::once(first).chain(more).collect()
}

/// A message ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub subject: String,
    pub text: String,
    pub html: String,
}

#[derive(Debug, thiserror::Error)]
#[error("rendering the {kind} message: {detail}")]
pub struct RenderError {
    kind: MailKind,
    detail: String,
}

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        // Text templates are not escaped; the layout is (by its .html name).
        for (name, source) in TEMPLATES {
            // The templates are the repository's, checked by the tests below; one that
            // did not parse would fail every render of it, loudly.
            if let Err(e) = env.add_template(name, source) {
                tracing::error!(template = name, error = %e, "a mail template does not parse");
            }
        }
        env
    })
}

macro_rules! templates {
    ($($name:literal),* $(,)?) => {
        [$(($name, include_str!(concat!("../../templates/mail/", $name)))),*]
    };
}

const TEMPLATES: [(&str, &str); 25] = templates!(
    "layout.html",
    "en/confirmation.txt",
    "en/cancellation.txt",
    "en/expiry.txt",
    "en/dates_changed.txt",
    "en/no_show.txt",
    "en/stay.txt",
    "en/policy.txt",
    "en/taxes.txt",
    "pt/confirmation.txt",
    "pt/cancellation.txt",
    "pt/expiry.txt",
    "pt/dates_changed.txt",
    "pt/no_show.txt",
    "pt/stay.txt",
    "pt/policy.txt",
    "pt/taxes.txt",
    "fr/confirmation.txt",
    "fr/cancellation.txt",
    "fr/expiry.txt",
    "fr/dates_changed.txt",
    "fr/no_show.txt",
    "fr/stay.txt",
    "fr/policy.txt",
    "fr/taxes.txt",
);

/// An amount as a guest reads it: in currency units with the currency's minor digits,
/// and its code (`480.50 EUR`, `48050 JPY`).
fn money(cents: Cents, currency: Currency) -> String {
    let cents = cents.get();
    let sign = if cents < 0 { "-" } else { "" };
    let cents = cents.unsigned_abs();
    let digits = u32::from(currency.minor_digits());
    let unit = 10u64.pow(digits);
    let code = currency.code();
    if digits == 0 {
        format!("{sign}{cents} {code}")
    } else {
        let width = digits as usize;
        format!("{sign}{}.{:0width$} {code}", cents / unit, cents % unit)
    }
}

struct Policy {
    refundable: bool,
    full_refund_hours: u32,
    partial_refund_hours: u32,
    partial_refund_percent: u8,
}

impl Policy {
    fn value(&self) -> minijinja::Value {
        minijinja::Value::from_pairs([
            ("refundable", minijinja::Value::from(self.refundable)),
            ("full_refund_hours", self.full_refund_hours.into()),
            ("partial_refund_hours", self.partial_refund_hours.into()),
            ("partial_refund_percent", self.partial_refund_percent.into()),
        ])
    }
}

impl From<CancellationPolicy> for Policy {
    fn from(policy: CancellationPolicy) -> Self {
        match policy {
            CancellationPolicy::Refundable {
                full_refund_hours,
                partial_refund_hours,
                partial_refund_percent,
            } => Self {
                refundable: true,
                full_refund_hours,
                partial_refund_hours,
                partial_refund_percent,
            },
            CancellationPolicy::NonRefundable => Self {
                refundable: false,
                full_refund_hours: 0,
                partial_refund_hours: 0,
                partial_refund_percent: 0,
            },
        }
    }
}

/// Renders the message of `kind` about `facts`.
pub fn render(
    kind: MailKind,
    facts: &MailFacts,
    names: &Names<'_>,
) -> Result<Rendered, RenderError> {
    let failed = |e: minijinja::Error| RenderError {
        kind,
        detail: e.to_string(),
    };
    let lang = names.language.code();
    let previous = facts.previous_stay.as_ref();
    let dates = |stay: Option<&StayDates>| {
        (
            stay.map(|s| s.start().to_string()),
            stay.map(|s| s.end().to_string()),
        )
    };
    let (previous_check_in, previous_check_out) = dates(previous);
    let currency = facts.currency;
    let env = environment();
    let template = env
        .get_template(&format!("{lang}/{}.txt", kind.as_str()))
        .map_err(failed)?;
    let whole = template
        .render(context! {
            guest_name => names.guest_name,
            hotel => names.hotel,
            room_type => names.room_type,
            lines => lines(facts, names),
            reference => &names.reference,
            check_in => facts.stay.start().to_string(),
            check_out => facts.stay.end().to_string(),
            nights => facts.stay.night_count(),
            rooms => facts.rooms.get(),
            guests => facts.guests.get(),
            total => money(facts.total_due_cents.unwrap_or(facts.total_cents), currency),
            policy => Policy::from(facts.cancellation_policy).value(),
            refund => facts.refund_cents.filter(|c| c.get() > 0).map(|c| money(c, currency)),
            card => facts.kept_cents.is_some(),
            kept => facts.kept_cents.filter(|c| c.get() > 0).map(|c| money(c, currency)),
            previous_check_in,
            previous_check_out,
            fee => facts.fee_cents.map(|c| money(c, currency)),
            taxes => facts
                .taxes
                .iter()
                .map(|t| context! {
                    code => &t.code,
                    amount => money(t.amount, currency),
                    included => t.included,
                })
                .collect::<Vec<_>>(),
        })
        .map_err(failed)?;
    let (first, body) = whole.split_once('\n').unwrap_or((whole.as_str(), ""));
    let subject = first
        .strip_prefix("Subject:")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| RenderError {
            kind,
            detail: "the template's first line is not its subject".into(),
        })?
        .to_owned();
    let text = format!("{}\n", body.trim());
    let paragraphs: Vec<Vec<String>> = text
        .split("\n\n")
        .map(|p| {
            p.lines()
                .map(|l| l.trim_end().to_owned())
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
        })
        .filter(|p| !p.is_empty())
        .collect();
    let html = env
        .get_template("layout.html")
        .map_err(failed)?
        .render(context! {
            lang,
            subject => &subject,
            hotel => names.hotel,
            paragraphs,
        })
        .map_err(failed)?;
    Ok(Rendered {
        subject,
        text,
        html,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aggregates::{GuestCount, HotelId, RoomCount, RoomTypeId};
    use chrono::{NaiveDate, Utc};

    fn facts() -> MailFacts {
        let day = |d| NaiveDate::from_ymd_opt(2027, 3, d).expect("a date");
        MailFacts {
            more_lines: Vec::new(),
            hotel_id: HotelId::parse(7).expect("an id"),
            room_type_id: RoomTypeId::parse(1).expect("an id"),
            stay: StayDates::parse(day(10), day(13)).expect("dates"),
            rooms: RoomCount::parse(2).expect("rooms"),
            guests: GuestCount::one(),
            total_cents: Cents::new(48_050),
            cancellation_policy: CancellationPolicy::HOUSE,
            at: Utc::now(),
            refund_cents: Some(Cents::new(24_025)),
            kept_cents: Some(Cents::new(24_025)),
            previous_stay: Some(StayDates::parse(day(1), day(4)).expect("dates")),
            fee_cents: Some(Cents::new(16_016)),
            released_from: Some(day(11)),
            currency: Currency::EUR,
            total_due_cents: None,
            taxes: Vec::new(),
        }
    }

    #[test]
    fn a_stay_of_two_room_types_lists_each_with_its_rooms_and_policy() {
        let family = MailFacts {
            more_lines: vec![store::write::mail::MailLine {
                room_type_id: RoomTypeId::parse(2).expect("an id"),
                rooms: RoomCount::parse(1).expect("rooms"),
                guests: GuestCount::parse(2).expect("guests"),
                cancellation_policy: CancellationPolicy::NonRefundable,
            }],
            ..facts()
        };
        let twin = ["Twin".to_owned()];
        let named = Names {
            more_room_types: &twin,
            ..names(Language::English)
        };

        let mail = render(MailKind::Confirmation, &family, &named).expect("renders");

        for line in [
            "Room: Double x 2, 1 guest per room",
            "Room: Twin x 1, 2 guests per room",
            "Double: Cancellation: free until 72 hours before arrival; 50% back until 24 hours before; nothing after.",
            "Twin: Cancellation: this rate is not refundable.",
        ] {
            assert!(mail.text.lines().any(|l| l == line), "lacks {line:?}:\n{}", mail.text);
        }
        // One room type: the policy alone, as before lines.
        let single =
            render(MailKind::Confirmation, &facts(), &names(Language::English)).expect("renders");
        assert!(single
            .text
            .lines()
            .any(|l| l.starts_with("Cancellation: free until")));
    }

    #[test]
    fn a_taxed_stay_lists_its_taxes_under_the_total_due_in_every_language() {
        let taxed = MailFacts {
            currency: Currency::parse("CHF").expect("a currency"),
            total_due_cents: Some(Cents::new(49_050)),
            taxes: vec![
                aggregates::taxes::TaxLine {
                    code: "VAT".into(),
                    amount: Cents::new(1_757),
                    included: true,
                },
                aggregates::taxes::TaxLine {
                    code: "CITY".into(),
                    amount: Cents::new(1_000),
                    included: false,
                },
            ],
            ..facts()
        };
        for (language, lines) in [
            (
                Language::English,
                [
                    "Total: 490.50 CHF",
                    "VAT (included): 17.57 CHF",
                    "CITY: 10.00 CHF",
                ],
            ),
            (
                Language::Portuguese,
                [
                    "Total: 490.50 CHF",
                    "VAT (incluído): 17.57 CHF",
                    "CITY: 10.00 CHF",
                ],
            ),
            (
                Language::French,
                [
                    "Total : 490.50 CHF",
                    "VAT (inclus) : 17.57 CHF",
                    "CITY : 10.00 CHF",
                ],
            ),
        ] {
            let mail = render(MailKind::Confirmation, &taxed, &names(language)).expect("renders");
            let found: Vec<&str> = mail.text.lines().collect();
            for line in lines {
                assert!(
                    found.contains(&line),
                    "{language:?} lacks {line:?}:\n{}",
                    mail.text
                );
            }
        }
        // Untaxed: the total stands alone, as before taxes existed.
        let plain =
            render(MailKind::Confirmation, &facts(), &names(Language::English)).expect("renders");
        assert!(
            plain.text.contains("Total: 480.50 EUR\n\n"),
            "{}",
            plain.text
        );
    }

    #[test]
    fn amounts_are_written_with_their_currencys_minor_digits_and_code() {
        let parse = |code| Currency::parse(code).expect("a currency");
        assert_eq!(money(Cents::new(48_050), Currency::EUR), "480.50 EUR");
        assert_eq!(money(Cents::new(48_050), parse("JPY")), "48050 JPY");
        assert_eq!(money(Cents::new(48_050), parse("BHD")), "48.050 BHD");
        assert_eq!(money(Cents::new(-5), parse("CHF")), "-0.05 CHF");
    }

    fn names(language: Language) -> Names<'static> {
        Names {
            reference: "r-1".into(),
            guest_name: "Ana <b>Silva</b>",
            hotel: "Hotel Tejo",
            room_type: "Double",
            more_room_types: &[],
            language,
        }
    }

    #[test]
    fn every_kind_renders_in_every_language_with_its_subject_and_both_bodies() {
        for language in [Language::English, Language::Portuguese, Language::French] {
            for kind in MailKind::ALL {
                let mail = render(kind, &facts(), &names(language))
                    .unwrap_or_else(|e| panic!("{kind} in {language:?}: {e}"));
                assert!(mail.subject.contains("Hotel Tejo"), "{}", mail.subject);
                assert!(mail.text.contains("2027-03-10"), "{}", mail.text);
                assert!(mail.text.contains("r-1"), "{}", mail.text);
                assert!(!mail.text.contains("{{") && !mail.text.contains("{%"));
                assert!(mail.html.contains("2027-03-10"));
            }
        }
    }

    #[test]
    fn the_money_of_each_kind_is_in_its_message() {
        let english = names(Language::English);
        let confirmation = render(MailKind::Confirmation, &facts(), &english).expect("renders");
        assert!(
            confirmation.text.contains("480.50"),
            "{}",
            confirmation.text
        );
        assert!(
            confirmation.text.contains("72 hours"),
            "{}",
            confirmation.text
        );
        let cancellation = render(MailKind::Cancellation, &facts(), &english).expect("renders");
        assert!(
            cancellation.text.contains("240.25"),
            "{}",
            cancellation.text
        );
        let no_show = render(MailKind::NoShow, &facts(), &english).expect("renders");
        assert!(no_show.text.contains("160.16"), "{}", no_show.text);
        let moved = render(MailKind::DatesChanged, &facts(), &english).expect("renders");
        assert!(moved.text.contains("2027-03-01"), "{}", moved.text);
    }

    #[test]
    fn a_cancellation_without_refund_says_so() {
        let facts = MailFacts {
            refund_cents: Some(Cents::ZERO),
            kept_cents: Some(Cents::new(24_025)),
            ..facts()
        };
        let mail =
            render(MailKind::Cancellation, &facts, &names(Language::English)).expect("renders");
        assert!(mail.text.contains("Nothing is refunded"), "{}", mail.text);
        assert!(mail.text.contains("240.25"), "{}", mail.text);
    }

    #[test]
    fn a_cancellation_that_voids_the_card_says_nothing_was_charged_not_refunded() {
        for language in [Language::English, Language::French, Language::Portuguese] {
            let facts = MailFacts {
                refund_cents: Some(Cents::ZERO),
                kept_cents: Some(Cents::ZERO),
                ..facts()
            };
            let mail = render(MailKind::Cancellation, &facts, &names(language)).expect("renders");
            let english = language == Language::English;
            assert!(
                !english || mail.text.contains("Nothing was charged"),
                "{}",
                mail.text
            );
            assert!(!mail.text.contains("0.00"), "{}", mail.text);
        }
    }

    #[test]
    fn the_html_body_escapes_what_the_guest_typed() {
        let mail =
            render(MailKind::Confirmation, &facts(), &names(Language::English)).expect("renders");
        assert!(
            mail.html.contains("Ana &lt;b&gt;Silva&lt;"),
            "{}",
            mail.html
        );
        assert!(!mail.html.contains("<b>"), "{}", mail.html);
        assert!(mail.text.contains("Ana <b>Silva</b>"));
    }

    #[test]
    fn a_hotel_writes_in_the_language_of_its_time_zone() {
        assert_eq!(Language::of_timezone("Europe/Lisbon"), Language::Portuguese);
        assert_eq!(Language::of_timezone("Europe/Paris"), Language::French);
        assert_eq!(Language::of_timezone("Asia/Tokyo"), Language::English);
        let mail = render(
            MailKind::Confirmation,
            &facts(),
            &names(Language::Portuguese),
        )
        .expect("renders");
        assert!(mail.subject.contains("confirmada"), "{}", mail.subject);
    }
}
