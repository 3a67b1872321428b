//! Which shard each hotel's writes belong to: the boundary no transaction crosses.
//!
//! Every write of the booking path touches the nights of one `(hotel, room type)` at a
//! time, and the log could be split by hotel across several primaries. Group commit
//! gathers holds of many hotels into one transaction (one commit and one set of
//! statements for the lot, where a transaction per hotel paid them per hold under
//! spread load), but only hotels of the same shard: the day shards live on different
//! nodes, no batch has to become a distributed transaction.
//!
//! The map is configuration (`HOTEL_SHARDS`, e.g. `1-499:eu,500-999:us,1200:eu`: hotel
//! ids or inclusive ranges, each to a shard name); a hotel it does not name is in the
//! shard `main`, so an empty map is one shard, the default, and every batch may take
//! any hotel. All servers of a deployment must map alike: the first to start records
//! its map in the database, and a server with another map refuses to start (see
//! [`check_recorded`]).

use aggregates::HotelId;
use sqlx::PgPool;

/// The shard of every hotel the map does not name.
pub const DEFAULT_SHARD: &str = "main";

/// Hotel ids (inclusive ranges) to shards; see the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardMap {
    /// Sorted by first id, never overlapping; the index is into `names`.
    ranges: Vec<(i64, i64, usize)>,
    /// `names[0]` is [`DEFAULT_SHARD`].
    names: Vec<String>,
}

impl ShardMap {
    /// Reads `HOTEL_SHARDS`: comma-separated `id:shard` or `first-last:shard`; empty is
    /// one shard. A shard name is 1 to 40 of `a-z`, `0-9`, `_`, `-`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut names = vec![DEFAULT_SHARD.to_owned()];
        let mut ranges = Vec::new();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |why: &str| format!("HOTEL_SHARDS: {entry:?} {why}");
            let (ids, name) = entry
                .split_once(':')
                .ok_or_else(|| bad("is not `hotel:shard` or `first-last:shard`"))?;
            let name = name.trim();
            let valid_name = (1..=40).contains(&name.len())
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
            if !valid_name {
                return Err(bad(
                    "names a shard that is not 1 to 40 of a-z, 0-9, _ and -",
                ));
            }
            let id = |text: &str| {
                text.trim()
                    .parse::<i64>()
                    .ok()
                    .and_then(|n| HotelId::parse(n).ok())
                    .map(HotelId::get)
                    .ok_or_else(|| bad("has a hotel id that is not a positive integer"))
            };
            let (first, last) = match ids.split_once('-') {
                Some((first, last)) => (id(first)?, id(last)?),
                None => {
                    let one = id(ids)?;
                    (one, one)
                }
            };
            if first > last {
                return Err(bad("is a range that ends before it starts"));
            }
            let index = match names.iter().position(|n| n == name) {
                Some(index) => index,
                None => {
                    names.push(name.to_owned());
                    names.len() - 1
                }
            };
            ranges.push((first, last, index));
        }
        ranges.sort_unstable();
        for pair in ranges.windows(2) {
            if pair[1].0 <= pair[0].1 {
                return Err(format!(
                    "HOTEL_SHARDS: hotels {}-{} and {}-{} overlap: a hotel is in one shard",
                    pair[0].0, pair[0].1, pair[1].0, pair[1].1
                ));
            }
        }
        Ok(Self { ranges, names })
    }

    /// The shard of `hotel`, as an index (equal indexes, equal shards).
    pub fn shard_of(&self, hotel: HotelId) -> usize {
        let id = hotel.get();
        let after = self.ranges.partition_point(|(first, _, _)| *first <= id);
        match after.checked_sub(1).map(|i| self.ranges[i]) {
            Some((_, last, shard)) if id <= last => shard,
            _ => 0,
        }
    }

    /// The name of a shard index from [`Self::shard_of`].
    pub fn name(&self, shard: usize) -> &str {
        self.names.get(shard).map_or(DEFAULT_SHARD, String::as_str)
    }

    /// The map written one way only (sorted ranges, `first-last:name`), to compare two
    /// servers' maps; empty for one shard.
    pub fn canonical(&self) -> String {
        self.ranges
            .iter()
            .map(|(first, last, shard)| {
                let name = self.name(*shard);
                if first == last {
                    format!("{first}:{name}")
                } else {
                    format!("{first}-{last}:{name}")
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Records `map` as the deployment's if none is recorded yet, and refuses one that
/// differs from the recorded map: two servers that batched by different maps could put
/// two shards' hotels in one transaction.
pub async fn check_recorded(pool: &PgPool, map: &ShardMap) -> anyhow::Result<()> {
    let ours = map.canonical();
    let recorded: String = sqlx::query_scalar(
        "WITH made AS (
             INSERT INTO deployment_settings (name, value) VALUES ('hotel_shards', $1)
             ON CONFLICT (name) DO NOTHING RETURNING value)
         SELECT value FROM made
          UNION ALL
         SELECT value FROM deployment_settings WHERE name = 'hotel_shards'
          LIMIT 1",
    )
    .bind(&ours)
    .fetch_one(pool)
    .await?;
    if recorded != ours {
        let shown = |m: &str| {
            if m.is_empty() {
                "one shard (HOTEL_SHARDS empty)".to_owned()
            } else {
                format!("HOTEL_SHARDS={m}")
            }
        };
        anyhow::bail!(
            "this server maps hotels to shards as {} but the deployment's servers map them \
             as {}: every server of one database must use the same HOTEL_SHARDS",
            shown(&ours),
            shown(&recorded)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hotel(id: i64) -> HotelId {
        HotelId::parse(id).expect("hotel id")
    }

    #[test]
    fn an_empty_map_is_one_shard_for_every_hotel() {
        let map = ShardMap::parse("").expect("empty");

        assert_eq!(map.shard_of(hotel(1)), map.shard_of(hotel(9_999)));
        assert_eq!(map.name(map.shard_of(hotel(812))), "main");
        assert_eq!(map.canonical(), "");
    }

    #[test]
    fn hotels_and_ranges_go_to_their_shards_and_the_rest_to_main() {
        let map = ShardMap::parse(" 500-999:us, 1-499:eu ,1200:eu").expect("map");

        let name = |id| map.name(map.shard_of(hotel(id)));
        assert_eq!(
            [1, 499, 500, 999, 1000, 1200, 1201].map(name),
            ["eu", "eu", "us", "us", "main", "eu", "main"]
        );
        assert_eq!(map.canonical(), "1-499:eu,500-999:us,1200:eu");
        assert_eq!(
            ShardMap::parse("1200:eu,1-499:eu,500-999:us").map(|m| m.canonical()),
            Ok(map.canonical())
        );
    }

    #[test]
    fn a_map_that_cannot_be_read_is_refused_saying_which_entry() {
        for bad in [
            "812",
            "812:",
            "812:EU",
            "0:eu",
            "x:eu",
            "9-1:eu",
            "1-10:eu,10-20:us",
        ] {
            let refused = ShardMap::parse(bad).expect_err(bad);
            assert!(refused.starts_with("HOTEL_SHARDS: "), "{bad}: {refused}");
        }
    }
}
