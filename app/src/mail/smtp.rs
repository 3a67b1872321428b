//! The [`Mailer`] of a deployment: an SMTP server, through `lettre`.
//!
//! `SMTP_URL` says where and how: `smtp://host:port` (plain, as a local relay or a test
//! sink takes it), `smtp://host:587?tls=required` (STARTTLS), `smtps://host:465`, with
//! `user:password@` when the server wants them (see `lettre`'s `from_url`).

use std::time::Duration;

use async_trait::async_trait;
use lettre::message::{Mailbox, MultiPart};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use super::{Mail, MailError, Mailer};

pub struct SmtpMailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    /// The right-hand side of the messages' `Message-ID`s (the sender's domain).
    domain: String,
}

/// Why the mail settings cannot be used (a setting to fix, found at start).
#[derive(Debug, thiserror::Error)]
pub enum SmtpSettingsError {
    #[error("SMTP_URL: {0}")]
    Url(String),
    #[error("MAIL_FROM must be an address such as 'Hotel Reservations <stay@example.com>': {0}")]
    From(String),
}

impl SmtpMailer {
    /// A mailer sending through `url` as `from`; connects lazily (a server down at
    /// start is retried like any other outage).
    pub fn new(url: &str, from: &str) -> Result<Self, SmtpSettingsError> {
        let from: Mailbox = from
            .parse()
            .map_err(|e: lettre::address::AddressError| SmtpSettingsError::From(e.to_string()))?;
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|e| SmtpSettingsError::Url(e.to_string()))?
            .timeout(Some(Duration::from_secs(10)))
            .build();
        let domain = from.email.domain().to_owned();
        Ok(Self {
            transport,
            from,
            domain,
        })
    }
}

#[async_trait]
impl Mailer for SmtpMailer {
    async fn send(&self, mail: &Mail) -> Result<(), MailError> {
        let to = Mailbox::new(
            Some(mail.to_name.clone()),
            mail.to
                .parse()
                .map_err(|e: lettre::address::AddressError| {
                    MailError::Refused(format!("recipient: {e}"))
                })?,
        );
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(mail.subject.clone())
            .message_id(Some(format!("<{}@{}>", mail.message_id, self.domain)))
            .multipart(MultiPart::alternative_plain_html(
                mail.text.clone(),
                mail.html.clone(),
            ))
            .map_err(|e| MailError::Refused(format!("building the message: {e}")))?;
        match self.transport.send(message).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_permanent() => Err(MailError::Refused(e.to_string())),
            Err(e) => Err(MailError::Unavailable(e.to_string())),
        }
    }
}
