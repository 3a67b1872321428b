//! Where partner webhooks may be sent: a guard against server-side request forgery.
//!
//! An admin names the URL a subscription posts to, and the server then makes requests
//! to it from inside the hotel's network. Left unchecked, `http://127.0.0.1:5432/`,
//! `http://169.254.169.254/` (a cloud's metadata service) or `http://10.0.0.7/` would
//! have the server call its own machine or its neighbours. So a destination must be a
//! public address, unless the operator names it in `WEBHOOK_ALLOWED_HOSTS` (a partner
//! reached over a private link, or a test's receiver on loopback):
//!
//! - when a subscription is put, a host that is an IP literal, or a name that resolves
//!   now, to a loopback, private, link-local or otherwise non-public address is refused
//!   (422 naming `url`);
//! - when a delivery is sent, the client resolves the name **once**, refuses it if any
//!   address it got is not public, and connects to exactly the addresses it checked
//!   (the guard is the client's resolver), so a name that turns private later (DNS
//!   rebinding) is refused at that moment. Redirects are never followed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// How long a subscription's check waits for its name to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// The destinations the operator allows beyond public addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Destinations {
    /// Host names (lower-cased) and IP addresses, as written in the setting.
    allowed: Vec<String>,
}

impl Destinations {
    /// A comma-separated list of host names and IP addresses (`127.0.0.1, partner.lan`);
    /// empty: public addresses only.
    pub fn parse(list: &str) -> Self {
        let allowed = list
            .split(',')
            .map(|host| {
                host.trim()
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_ascii_lowercase()
            })
            .filter(|host| !host.is_empty())
            .collect();
        Self { allowed }
    }

    /// Whether the operator named `host` (a name, or an address as the URL writes it).
    pub fn names(&self, host: &str) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        self.allowed.contains(&host)
    }

    /// Why a delivery to `ip` (reached as `host`) is refused, if it is.
    pub fn refusal(&self, host: &str, ip: IpAddr) -> Option<String> {
        if is_public(ip) || self.names(host) {
            return None;
        }
        let what = if literal_ip(host) == Some(ip) {
            format!("{host} is")
        } else {
            format!("{host} is {ip},")
        };
        Some(format!(
            "{what} a loopback, private or link-local address: webhooks go to public \
             addresses unless WEBHOOK_ALLOWED_HOSTS names the host"
        ))
    }

    /// The check of a subscription's URL when it is put: an IP literal, or a name as it
    /// resolves now. A name that does not resolve now is accepted (its deliveries are
    /// checked, and retried, as they are sent).
    pub async fn check_url(&self, url: &str) -> Result<(), String> {
        let parsed = reqwest::Url::parse(url).map_err(|_| "is not a valid URL".to_owned())?;
        let host = parsed
            .host_str()
            .ok_or_else(|| "has no host".to_owned())?
            .to_owned();
        if let Some(ip) = literal_ip(&host) {
            return self.refusal(&host, ip).map_or(Ok(()), Err);
        }
        if self.names(&host) {
            return Ok(());
        }
        let port = parsed.port_or_known_default().unwrap_or(80);
        let resolved = tokio::time::timeout(
            RESOLVE_TIMEOUT,
            tokio::net::lookup_host((host.as_str(), port)),
        )
        .await;
        let Ok(Ok(addresses)) = resolved else {
            return Ok(());
        };
        for address in addresses {
            if let Some(refusal) = self.refusal(&host, address.ip()) {
                return Err(refusal);
            }
        }
        Ok(())
    }
}

/// The address a URL's host writes, if it is one (`10.0.0.7`, `[::1]`).
pub fn literal_ip(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// The client deliveries are sent with: no proxy from the environment, no redirects,
/// and a resolver that refuses names resolving to non-public addresses (see the module
/// docs). IP literals never reach a resolver: the sender checks them itself
/// ([`Destinations::refusal`]).
pub fn client(destinations: &Destinations) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(Arc::new(Guarded {
            destinations: destinations.clone(),
        }))
        .build()
}

/// The resolver of [`client`].
struct Guarded {
    destinations: Destinations,
}

impl Resolve for Guarded {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let destinations = self.destinations.clone();
        Box::pin(async move {
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for address in &addresses {
                if let Some(refusal) = destinations.refusal(&host, address.ip()) {
                    return Err(refusal.into());
                }
            }
            let addresses: Addrs = Box::new(addresses.into_iter());
            Ok(addresses)
        })
    }
}

/// Whether `ip` is an address of the public internet: not loopback, private,
/// link-local, shared (carrier-grade NAT), unspecified, broadcast, multicast,
/// documentation, benchmarking or reserved, in IPv4 or IPv6 (an IPv4 address mapped
/// into IPv6 is judged as itself).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (18..20).contains(&b))
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_unique_local()
        || ip.is_unicast_link_local()
        || (first & 0xffc0) == 0xfec0
        || (first == 0x2001 && ip.segments()[1] == 0x0db8)
        || ip.to_ipv4().is_some_and(|v4| !is_public_v4(v4)) && first == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn loopback_private_link_local_and_reserved_addresses_are_not_public() {
        for address in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "198.18.0.1",
            "::1",
            "::",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "2001:db8::1",
        ] {
            assert!(!is_public(ip(address)), "{address}");
        }
    }

    #[test]
    fn addresses_of_the_internet_are_public() {
        for address in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(ip(address)), "{address}");
        }
    }

    #[test]
    fn a_host_the_operator_names_is_allowed_whatever_its_address() {
        let destinations = Destinations::parse(" 127.0.0.1 , Partner.LAN,[::1]");

        assert_eq!(destinations.refusal("127.0.0.1", ip("127.0.0.1")), None);
        assert_eq!(destinations.refusal("partner.lan", ip("10.0.0.7")), None);
        assert_eq!(destinations.refusal("[::1]", ip("::1")), None);
        assert!(destinations.refusal("localhost", ip("127.0.0.1")).is_some());
        assert!(Destinations::default()
            .refusal("127.0.0.1", ip("127.0.0.1"))
            .is_some());
    }

    #[tokio::test]
    async fn a_subscription_to_a_private_literal_or_localhost_is_refused() {
        let public_only = Destinations::default();

        for url in [
            "http://127.0.0.1:8080/hook",
            "http://10.0.0.7/hook",
            "http://[::1]/hook",
            "http://169.254.169.254/latest/meta-data",
            "http://localhost:9/hook",
        ] {
            assert!(public_only.check_url(url).await.is_err(), "{url}");
        }
        assert_eq!(
            Destinations::parse("127.0.0.1")
                .check_url("http://127.0.0.1:8080/hook")
                .await,
            Ok(())
        );
    }
}
