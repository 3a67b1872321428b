//! A hotel's taxes and fees, and what they come to on a stay.
//!
//! Three kinds, as hotels levy them: a **percentage** of the room price (VAT), either
//! included in it (shown as its share, not added) or added on top; an amount **per
//! person and night** (a city tax, often capped at a number of nights); an amount **per
//! stay** (a cleaning fee). Amounts are integers in the hotel's currency's minor unit,
//! and a percentage's fraction of a minor unit is rounded half away from zero, once per
//! tax and stay, so the lines add up to what is charged.
//!
//! Pure arithmetic: the rules arrive parsed, the stay's figures arrive in the call. A
//! reservation keeps the lines it was sold with (as it keeps its policy), so a later
//! change to the rules never reprices a sale.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::types::{Cents, InvalidInput};

/// At most this many taxes per hotel.
pub const MAX_TAXES: usize = 10;

/// A percentage in hundredths of a percent (6% is 600; 7.25% is 725).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BasisPoints(u32);

impl BasisPoints {
    /// From the API's percentage: above 0, at most 100, with at most two decimals.
    pub fn from_percent(percent: f64) -> Result<Self, InvalidInput> {
        let bad = || {
            InvalidInput::new(
                "percent",
                "must be above 0 and at most 100, with at most two decimals",
            )
        };
        if !percent.is_finite() || percent <= 0.0 || percent > 100.0 {
            return Err(bad());
        }
        let hundredths = (percent * 100.0).round();
        if (percent * 100.0 - hundredths).abs() > 1e-6 {
            return Err(bad());
        }
        // In range: 1..=10_000.
        Ok(Self(hundredths as u32))
    }

    pub fn get(self) -> u32 {
        self.0
    }

    /// As the API writes it.
    pub fn percent(self) -> f64 {
        f64::from(self.0) / 100.0
    }
}

/// How a tax is levied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum TaxKind {
    /// A share of the room price; `included`: already in it (shown, not added).
    Percent { rate: BasisPoints, included: bool },
    /// An amount per guest and night, for at most `max_nights` nights of a stay.
    PerPersonNight {
        amount: Cents,
        max_nights: Option<u32>,
    },
    /// An amount per stay.
    PerStay { amount: Cents },
}

/// One tax of a hotel: its code (`VAT`, `CITY`) and how it is levied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tax {
    code: String,
    kind: TaxKind,
}

impl Tax {
    /// `code`: 1 to 10 of `A-Z`, `0-9` and `-`; amounts above zero; a cap, if any, of at
    /// least one night.
    pub fn parse(code: &str, kind: TaxKind) -> Result<Self, InvalidInput> {
        let valid_code = !code.is_empty()
            && code.len() <= 10
            && code
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-');
        if !valid_code {
            return Err(InvalidInput::new(
                "code",
                "must be 1 to 10 characters of A-Z, 0-9 and -",
            ));
        }
        match kind {
            TaxKind::PerPersonNight { amount, .. } | TaxKind::PerStay { amount }
                if amount.get() <= 0 =>
            {
                return Err(InvalidInput::new("amount_cents", "must be above 0"));
            }
            TaxKind::PerPersonNight {
                max_nights: Some(0),
                ..
            } => return Err(InvalidInput::new("max_nights", "must be at least 1")),
            _ => {}
        }
        Ok(Self {
            code: code.to_owned(),
            kind,
        })
    }

    pub fn code(&self) -> &str {
        &self.code
    }

    pub fn kind(&self) -> TaxKind {
        self.kind
    }

    /// Whether the room price already holds it.
    pub fn included(&self) -> bool {
        matches!(self.kind, TaxKind::Percent { included: true, .. })
    }
}

/// A hotel's taxes: distinct codes, at most [`MAX_TAXES`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taxes(Vec<Tax>);

impl Taxes {
    pub fn parse(taxes: Vec<Tax>) -> Result<Self, InvalidInput> {
        if taxes.len() > MAX_TAXES {
            return Err(InvalidInput::new(
                "taxes",
                format!("at most {MAX_TAXES} taxes per hotel"),
            ));
        }
        let mut codes = BTreeSet::new();
        if let Some(twice) = taxes.iter().find(|t| !codes.insert(t.code.as_str())) {
            return Err(InvalidInput::new(
                "code",
                format!("{} is given twice; each tax's code is its own", twice.code),
            ));
        }
        Ok(Self(taxes))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Tax> {
        self.0.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// What the taxes come to on a stay whose room price is `room_total`, for `rooms`
    /// rooms of `guests` guests each over `nights` nights; `None` on overflow.
    pub fn on_stay(&self, stay: StayFigures) -> Option<TaxedStay> {
        let mut lines = Vec::with_capacity(self.0.len());
        let mut added = 0i64;
        for tax in &self.0 {
            let amount = match tax.kind {
                TaxKind::Percent { rate, included } => {
                    let rate = i128::from(rate.get());
                    let total = i128::from(stay.room_total.get());
                    // Included: the share of a price that holds the tax already.
                    let (numerator, denominator) = if included {
                        (total * rate, 10_000 + rate)
                    } else {
                        (total * rate, 10_000)
                    };
                    i64::try_from(divide_rounding(numerator, denominator)).ok()?
                }
                TaxKind::PerPersonNight { amount, max_nights } => {
                    let nights = max_nights.map_or(stay.nights, |cap| stay.nights.min(cap));
                    let persons = i64::from(stay.rooms).checked_mul(i64::from(stay.guests))?;
                    amount
                        .get()
                        .checked_mul(persons)?
                        .checked_mul(i64::from(nights))?
                }
                // Due for a stay of at least one night (a stay given up before it
                // began owes none: see `ReservationDetails::due_keeping`).
                TaxKind::PerStay { amount } if stay.nights > 0 => amount.get(),
                TaxKind::PerStay { .. } => 0,
            };
            if !tax.included() {
                added = added.checked_add(amount)?;
            }
            lines.push(TaxLine {
                code: tax.code.clone(),
                amount: Cents::new(amount),
                included: tax.included(),
            });
        }
        Some(TaxedStay {
            total_due: Cents::new(stay.room_total.get().checked_add(added)?),
            lines,
        })
    }
}

impl Taxes {
    /// [`Self::on_stay`], or the room price alone in the impossible case that the
    /// amounts do not fit (prices are bounded far below): what every sale and answer
    /// shows.
    pub fn due_on(&self, stay: StayFigures) -> TaxedStay {
        self.on_stay(stay)
            .unwrap_or_else(|| TaxedStay::untaxed(stay.room_total))
    }
}

/// `n / d` rounded half away from zero (`d` > 0).
fn divide_rounding(n: i128, d: i128) -> i128 {
    let half = d / 2;
    if n >= 0 {
        (n + half) / d
    } else {
        (n - half) / d
    }
}

/// The figures of a stay its taxes are computed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StayFigures {
    /// The room price of the whole stay, every room and night.
    pub room_total: Cents,
    pub nights: u32,
    pub rooms: u32,
    /// Guests per room.
    pub guests: u32,
}

/// One tax as a stay pays it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaxLine {
    pub code: String,
    pub amount: Cents,
    /// Already in the room price (shown, not added).
    pub included: bool,
}

/// A stay's taxes and what the guest owes: the room price plus every tax not included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaxedStay {
    pub lines: Vec<TaxLine>,
    pub total_due: Cents,
}

impl TaxedStay {
    /// A price without taxes: due as it is.
    pub fn untaxed(room_total: Cents) -> Self {
        Self {
            lines: Vec::new(),
            total_due: room_total,
        }
    }

    /// The taxes added to the room price (not those it already holds).
    pub fn added(&self) -> Cents {
        Cents::new(
            self.lines
                .iter()
                .filter(|l| !l.included)
                .map(|l| l.amount.get())
                .sum(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn percent(p: f64, included: bool) -> TaxKind {
        TaxKind::Percent {
            rate: BasisPoints::from_percent(p).expect("a rate"),
            included,
        }
    }

    fn lisbon() -> Taxes {
        Taxes::parse(vec![
            Tax::parse("VAT", percent(6.0, true)).expect("vat"),
            Tax::parse(
                "CITY",
                TaxKind::PerPersonNight {
                    amount: Cents::new(200),
                    max_nights: Some(7),
                },
            )
            .expect("city tax"),
            Tax::parse(
                "CLEAN",
                TaxKind::PerStay {
                    amount: Cents::new(2500),
                },
            )
            .expect("cleaning"),
        ])
        .expect("taxes")
    }

    fn stay(room_total: i64, nights: u32, rooms: u32, guests: u32) -> StayFigures {
        StayFigures {
            room_total: Cents::new(room_total),
            nights,
            rooms,
            guests,
        }
    }

    #[test]
    fn a_lisbon_stay_shows_its_vat_and_adds_the_city_tax_and_the_cleaning_fee() {
        // Three nights, one room of two guests, 530.00 with VAT included.
        let taxed = lisbon()
            .on_stay(stay(53_000, 3, 1, 2))
            .expect("no overflow");
        let lines: Vec<(&str, i64, bool)> = taxed
            .lines
            .iter()
            .map(|l| (l.code.as_str(), l.amount.get(), l.included))
            .collect();
        assert_eq!(
            lines,
            [
                ("VAT", 3_000, true),
                ("CITY", 1_200, false),
                ("CLEAN", 2_500, false)
            ]
        );
        assert_eq!(taxed.total_due, Cents::new(53_000 + 1_200 + 2_500));
    }

    #[test]
    fn the_city_tax_stops_at_its_cap_of_nights() {
        let taxed = lisbon()
            .on_stay(stay(100_000, 10, 2, 1))
            .expect("no overflow");
        // Two rooms of one guest: 2 persons x 7 nights (not 10) x 2.00.
        assert_eq!(taxed.lines[1].amount, Cents::new(2_800));
    }

    #[test]
    fn a_percentage_added_on_top_is_rounded_half_away_from_zero_once_per_stay() {
        let taxes = Taxes::parse(vec![
            Tax::parse("SALES", percent(7.25, false)).expect("sales tax")
        ])
        .expect("taxes");
        // 7.25% of 10.10 is 0.73225: 73.
        let taxed = taxes.on_stay(stay(1_010, 1, 1, 1)).expect("no overflow");
        assert_eq!(taxed.lines[0].amount, Cents::new(73));
        assert_eq!(taxed.total_due, Cents::new(1_083));
        // 10% of 0.05 is half a cent: up.
        let ten =
            Taxes::parse(vec![Tax::parse("T", percent(10.0, false)).expect("tax")]).expect("taxes");
        assert_eq!(
            ten.on_stay(stay(5, 1, 1, 1)).expect("no overflow").lines[0].amount,
            Cents::new(1)
        );
    }

    #[test]
    fn no_taxes_owe_the_room_price() {
        let taxed = Taxes::default().on_stay(stay(12_345, 2, 1, 1)).expect("ok");
        assert!(taxed.lines.is_empty());
        assert_eq!(taxed.total_due, Cents::new(12_345));
    }

    #[test]
    fn bad_rules_are_refused_naming_the_field() {
        let field = |r: Result<Tax, InvalidInput>| r.expect_err("refused").field;
        assert_eq!(field(Tax::parse("", percent(6.0, true))), "code");
        assert_eq!(field(Tax::parse("vat", percent(6.0, true))), "code");
        assert_eq!(
            field(Tax::parse("TOO-LONG-CODE", percent(6.0, true))),
            "code"
        );
        let per_stay = |cents| TaxKind::PerStay {
            amount: Cents::new(cents),
        };
        assert_eq!(field(Tax::parse("CLEAN", per_stay(0))), "amount_cents");
        let capped = TaxKind::PerPersonNight {
            amount: Cents::new(200),
            max_nights: Some(0),
        };
        assert_eq!(field(Tax::parse("CITY", capped)), "max_nights");
        for p in [0.0, -1.0, 100.01, 6.125, f64::NAN, f64::INFINITY] {
            assert_eq!(
                BasisPoints::from_percent(p).expect_err("refused").field,
                "percent",
                "{p}"
            );
        }
        assert_eq!(
            BasisPoints::from_percent(100.0).map(BasisPoints::get),
            Ok(10_000)
        );
        let twice = vec![
            Tax::parse("VAT", percent(6.0, true)).expect("vat"),
            Tax::parse("VAT", percent(23.0, true)).expect("vat"),
        ];
        assert_eq!(Taxes::parse(twice).expect_err("refused").field, "code");
        let many = (0..=MAX_TAXES)
            .map(|n| Tax::parse(&format!("T{n}"), per_stay(1)).expect("tax"))
            .collect();
        assert_eq!(Taxes::parse(many).expect_err("refused").field, "taxes");
    }

    #[test]
    fn taxes_read_back_as_they_were_written() {
        let json = serde_json::to_string(&lisbon()).expect("json");
        assert_eq!(
            serde_json::from_str::<Taxes>(&json).expect("back"),
            lisbon()
        );
    }

    proptest! {
        #[test]
        fn included_taxes_never_change_what_is_owed_and_added_ones_only_add(
            total in 0i64..100_000_000,
            nights in 1u32..60,
            rooms in 1u32..10,
            guests in 1u32..6,
            bp in 1u32..=10_000,
            included in any::<bool>(),
        ) {
            let rate = BasisPoints(bp);
            let taxes = Taxes::parse(vec![
                Tax::parse("P", TaxKind::Percent { rate, included }).expect("tax"),
            ]).expect("taxes");
            let taxed = taxes.on_stay(stay(total, nights, rooms, guests)).expect("no overflow");
            let share = taxed.lines[0].amount.get();
            prop_assert!(share >= 0);
            if included {
                prop_assert_eq!(taxed.total_due.get(), total);
                prop_assert!(share <= total);
            } else {
                prop_assert_eq!(taxed.total_due.get(), total + share);
            }
            // A larger rate never levies less.
            if bp < 10_000 {
                let more = Taxes::parse(vec![Tax::parse(
                    "P",
                    TaxKind::Percent { rate: BasisPoints(bp + 1), included },
                ).expect("tax")]).expect("taxes");
                let higher = more.on_stay(stay(total, nights, rooms, guests)).expect("ok");
                prop_assert!(higher.lines[0].amount.get() >= share);
            }
        }
    }
}
