//! Catalog and inventory commands (staff): a hotel's details and room types, and the
//! per-night inventory and rates of a room type over a range. The acting staff
//! member's name is recorded with the events, as every other command records its
//! caller's.

use aggregates::booking::{self, InventoryUpdate};
use aggregates::{
    CommandName, Hotel, HotelCommand, HotelDetails, HotelId, InvalidInput, Rejection,
    RoomTypeDetails, RoomTypeId, StayDates,
};
use chrono::NaiveDate;

use super::{Caller, CommandService};
use crate::error::CommandError;
use crate::write::{settle, with_retries, AttemptError, EventMetadata, Loader, Writer};

impl CommandService {
    /// Creates or updates a hotel's name, city and timezone.
    pub async fn set_hotel(
        &self,
        by: &Caller,
        hotel_id: HotelId,
        details: HotelDetails,
    ) -> Result<Hotel, CommandError> {
        let command = HotelCommand::SetDetails { hotel_id, details };
        self.hotel_command(by, hotel_id, command, CommandName::SetHotel)
            .await
    }

    /// Creates or updates a room type of an existing hotel.
    pub async fn set_room_type(
        &self,
        by: &Caller,
        hotel_id: HotelId,
        room_type_id: RoomTypeId,
        details: RoomTypeDetails,
    ) -> Result<Hotel, CommandError> {
        let command = HotelCommand::SetRoomType {
            room_type_id,
            details,
        };
        self.hotel_command(by, hotel_id, command, CommandName::SetRoomType)
            .await
    }

    async fn hotel_command(
        &self,
        by: &Caller,
        hotel_id: HotelId,
        command: HotelCommand,
        name: CommandName,
    ) -> Result<Hotel, CommandError> {
        let metadata = EventMetadata {
            command: name,
            client: by.name().to_owned(),
            idempotency_key: None,
        };
        with_retries(self.config.retry, |_| async {
            let mut tx = self.pool.begin().await?;
            let result: Result<_, AttemptError> = async {
                let (hotel, version) = Loader { conn: &mut tx }.hotel(hotel_id).await?;
                let events = hotel.decide(command.clone()).map_err(Rejection::from)?;
                let mut writer = Writer::new(&metadata)?;
                let after = writer.hotel(&mut tx, &hotel, version, &events).await?;
                writer.flush(&mut tx).await?;
                Ok(after)
            }
            .await;
            settle(tx, result).await
        })
        .await
    }

    /// Sets total rooms (and optionally allowance and rate) on every night of `range`
    /// for one room type, or on none. Returns how many nights were set.
    pub async fn set_inventory(
        &self,
        by: &Caller,
        hotel_id: HotelId,
        room_type_id: RoomTypeId,
        range: StayDates,
        update: InventoryUpdate,
    ) -> Result<u32, CommandError> {
        if range.night_count() > self.config.max_inventory_nights {
            return Err(Rejection::from(InvalidInput::new(
                "end_date",
                format!(
                    "at most {} nights per inventory update",
                    self.config.max_inventory_nights
                ),
            ))
            .into());
        }
        let now = self.now();
        let dates: Vec<NaiveDate> = range.nights().collect();
        let metadata = EventMetadata {
            command: CommandName::SetInventory,
            client: by.name().to_owned(),
            idempotency_key: None,
        };
        let locks = self.config.strategy.locks_nights();
        with_retries(self.config.retry, |_| async {
            let mut tx = self.pool.begin().await?;
            let result: Result<_, AttemptError> = async {
                let mut loader = Loader { conn: &mut tx };
                if locks {
                    loader.lock_room_type(hotel_id, room_type_id).await?;
                }
                let (hotel, _) = loader.hotel(hotel_id).await?;
                let nights = loader
                    .nights(hotel_id, room_type_id, &dates, None, now, locks)
                    .await?;
                let decision = booking::set_inventory(
                    &hotel,
                    &nights.nights,
                    booking::SetInventory {
                        hotel_id,
                        room_type_id,
                        range,
                        update,
                        now,
                    },
                )?;
                let mut writer = Writer::new(&metadata)?;
                writer.queue_nights(&nights, &decision)?;
                writer.flush(&mut tx).await?;
                Ok(range.night_count())
            }
            .await;
            settle(tx, result).await
        })
        .await
    }
}
