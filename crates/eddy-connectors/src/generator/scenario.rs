//! The reference data set: the seed pipeline's three streams with every
//! scenario it demonstrates planted at fixed event times.
//!
//! Time is measured from `T0 = 1_700_000_000_000` (2023-11-14T22:13:20Z).
//! Events are produced in blocks of 60 s of event time. Block 0 is the
//! reference scenario: background traffic plus the planted events below.
//! Later blocks (only when a row count asks for them) are background only.
//!
//! | offset (ms)            | stream   | planted                                                      |
//! |------------------------|----------|--------------------------------------------------------------|
//! | 2000 .. 22000          | orders+payments | cust-001 history: 5 matched payments, mean 109.66, σ 7.07 |
//! | 13000 .. 17100         | orders+payments | cust-004 velocity burst: 5 payments in [13 s, 18 s), 430.52 |
//! | 25500 / 26157          | orders+payments | order-9001 240.0 paid 90.0 by pay-9001: amount mismatch    |
//! | 26557                  | payments | pay-9002 for order-DOES-NOT-EXIST: unmatched                  |
//! | 27500 / 28057          | orders+payments | order-9003 / pay-9003 9800.0 for cust-001: amount anomaly  |
//! | 31700 .. 35700         | devices  | 8 faults at site-b: fault spike (6 in [30 s, 35 s))           |
//! | 32500 .. 36300         | devices  | dev-300 reboots 4 times in [32 s, 37 s): reboot loop          |
//! | 37507, 38407           | devices  | dev-100 firmware updates fail: firmware-failure run           |
//! | 41650 then 3507        | devices  | dev-101 heartbeat at 3507 arrives after 41650: late by 36143  |
//! | 44000 .. 56650         | all      | no events at all: a 12650 ms throughput gap                   |
//!
//! Background traffic: orders at `rate` per second, round-robin over
//! `max(8, 2 * rate)` customers (never cust-001 or cust-004), amounts that
//! cycle around a per-customer base so no rule fires on them; each order is
//! paid 200..1500 ms later with the exact amount. Device heartbeats at `rate`
//! per second round-robin over nine devices at three sites, every tenth a
//! successful firmware update. Every event arrives 0..1500 ms after its event
//! time, so streams are out of order within the 2 s watermark bound and only
//! the planted late event is late.

use super::rng::{hash_of, SplitMix64};

/// 2023-11-14T22:13:20Z, the start of the reference timeline.
pub const T0: i64 = 1_700_000_000_000;
/// Event-time length of one block.
pub const BLOCK_MS: i64 = 60_000;
/// Arrival delay is below this, keeping disorder inside the watermark bound.
const MAX_DELAY_MS: u64 = 1_500;

/// An order record.
#[derive(Debug, Clone, PartialEq)]
pub struct Order {
    /// `order-0000`.
    pub order_id: String,
    /// `cust-003`.
    pub customer_id: String,
    /// Order total.
    pub order_amount: f64,
    /// Epoch ms.
    pub order_ts: i64,
    /// ISO country code.
    pub country: &'static str,
}

/// A payment record.
#[derive(Debug, Clone, PartialEq)]
pub struct Payment {
    /// `pay-0000`.
    pub payment_id: String,
    /// The order paid.
    pub order_id: String,
    /// Amount paid.
    pub paid_amount: f64,
    /// Epoch ms.
    pub payment_ts: i64,
    /// `card`, `wallet`, `bank_transfer`.
    pub method: &'static str,
}

/// A device event record.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceEvent {
    /// `dev-100`.
    pub device_id: &'static str,
    /// `site-a`.
    pub site_id: &'static str,
    /// `heartbeat`, `fault`, `reboot`, `firmware_update`.
    pub event_type: &'static str,
    /// `ok`, `degraded`, `rebooting`, `failed`.
    pub status: &'static str,
    /// Epoch ms.
    pub event_ts: i64,
}

/// One event with the moment it arrives (emission order).
#[derive(Debug, Clone)]
pub struct Arriving<E> {
    /// Arrival time (ms); ties keep generation order.
    pub arrival: i64,
    /// Generation sequence number.
    pub seq: u64,
    /// The record.
    pub event: E,
}

const COUNTRIES: [&str; 8] = ["US", "CA", "GB", "DE", "FR", "MX", "BR", "JP"];
const METHODS: [&str; 3] = ["card", "wallet", "bank_transfer"];
const DEVICES: [(&str, &str); 9] = [
    ("dev-100", "site-a"),
    ("dev-101", "site-a"),
    ("dev-102", "site-a"),
    ("dev-200", "site-b"),
    ("dev-201", "site-b"),
    ("dev-202", "site-b"),
    ("dev-300", "site-c"),
    ("dev-301", "site-c"),
    ("dev-302", "site-c"),
];
/// Deviations that make a customer's amounts average to its base with a
/// population standard deviation of sqrt(50).
const AMOUNT_PATTERN: [f64; 5] = [-10.0, 10.0, -5.0, 5.0, 0.0];

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Shape of the background traffic.
#[derive(Debug, Clone, Copy)]
pub struct Background {
    /// Random seed.
    pub seed: u64,
    /// Events per second of event time, per stream.
    pub rate: u32,
}

impl Background {
    fn per_block(&self) -> u64 {
        u64::from(self.rate.max(1)) * (BLOCK_MS as u64 / 1000)
    }

    fn customers(&self) -> u64 {
        (2 * u64::from(self.rate)).max(8)
    }

    /// The background customer numbers skip 1 and 4 (planted customers).
    fn customer_number(&self, slot: u64) -> u64 {
        let mut n = slot;
        if n >= 1 {
            n += 1;
        }
        if n >= 4 {
            n += 1;
        }
        n
    }

    fn customer_base(&self, number: u64) -> f64 {
        if number == 3 {
            90.0
        } else {
            20.0 + (hash_of(self.seed, number) % 18_000) as f64 / 100.0
        }
    }

    /// Event time of the `i`-th background event of a block.
    fn time_of(&self, rng: &mut SplitMix64, block: i64, i: u64) -> i64 {
        let n = self.per_block();
        let spacing = BLOCK_MS as u64 / n.max(1);
        let jitter = rng.below((spacing / 2).max(1));
        T0 + block * BLOCK_MS + ((i * BLOCK_MS as u64) / n + jitter) as i64
    }
}

/// Background order numbers never collide with planted ones (9000..9999).
fn order_number(index: u64) -> u64 {
    if index < 9_000 {
        index
    } else {
        index + 1_000
    }
}

/// In block 0, the throughput gap: background events in these ranges are not produced.
fn in_gap(offset: i64, stream_margin: i64) -> bool {
    (42_000 - stream_margin..57_000).contains(&offset)
}

/// Background orders of `block`, in event-time order.
pub fn background_orders(bg: &Background, block: i64) -> Vec<Order> {
    let mut rng = SplitMix64::new(bg.seed, 0x0D0D + block as u64);
    let per_block = bg.per_block();
    let mut out = Vec::with_capacity(per_block as usize);
    for i in 0..per_block {
        let ts = bg.time_of(&mut rng, block, i);
        let index = block as u64 * per_block + i;
        if block == 0 && in_gap(ts - T0, 0) {
            continue;
        }
        let slot = index % bg.customers();
        let round = index / bg.customers();
        let number = bg.customer_number(slot);
        let amount = round2(bg.customer_base(number) + AMOUNT_PATTERN[(round % 5) as usize]);
        out.push(Order {
            order_id: format!("order-{:04}", order_number(index)),
            customer_id: format!("cust-{number:03}"),
            order_amount: amount,
            order_ts: ts,
            country: COUNTRIES[(hash_of(bg.seed ^ 0xC0, number) % COUNTRIES.len() as u64) as usize],
        });
    }
    out
}

fn planted_order(
    id: &str,
    customer: &str,
    amount: f64,
    offset: i64,
    country: &'static str,
) -> Order {
    Order {
        order_id: id.to_string(),
        customer_id: customer.to_string(),
        order_amount: amount,
        order_ts: T0 + offset,
        country,
    }
}

fn planted_payment(
    id: &str,
    order: &str,
    amount: f64,
    offset: i64,
    method: &'static str,
) -> Payment {
    Payment {
        payment_id: id.to_string(),
        order_id: order.to_string(),
        paid_amount: amount,
        payment_ts: T0 + offset,
        method,
    }
}

/// cust-001's history, cust-004's burst, the mismatch and the large payment:
/// (order, payment) pairs planted in block 0.
fn planted_pairs() -> Vec<(Order, Payment)> {
    let mut pairs = Vec::new();
    let history = [2_000, 7_000, 12_000, 19_000, 22_000];
    for (k, offset) in history.iter().enumerate() {
        let amount = round2(109.66 + AMOUNT_PATTERN[k]);
        let id = 9101 + k;
        pairs.push((
            planted_order(&format!("order-{id}"), "cust-001", amount, *offset, "US"),
            planted_payment(
                &format!("pay-{id}"),
                &format!("order-{id}"),
                amount,
                offset + 400,
                "card",
            ),
        ));
    }
    let burst = [80.10, 85.22, 90.40, 84.30, 90.50];
    for (k, amount) in burst.iter().enumerate() {
        let id = 9201 + k;
        let offset = 13_000 + 1_000 * k as i64;
        pairs.push((
            planted_order(
                &format!("order-{id}"),
                "cust-004",
                *amount,
                offset - 300,
                "CA",
            ),
            planted_payment(
                &format!("pay-{id}"),
                &format!("order-{id}"),
                *amount,
                offset + 100,
                "card",
            ),
        ));
    }
    pairs.push((
        planted_order("order-9001", "cust-003", 240.0, 25_500, "US"),
        planted_payment("pay-9001", "order-9001", 90.0, 26_157, "card"),
    ));
    pairs.push((
        planted_order("order-9003", "cust-001", 9_800.0, 27_500, "US"),
        planted_payment("pay-9003", "order-9003", 9_800.0, 28_057, "card"),
    ));
    pairs
}

/// Orders of `block` in arrival order.
pub fn orders(bg: &Background, block: i64) -> Vec<Arriving<Order>> {
    let mut events = background_orders(bg, block);
    if block == 0 {
        events.extend(planted_pairs().into_iter().map(|(o, _)| o));
    }
    let mut rng = SplitMix64::new(bg.seed, 0xA0A0 + block as u64);
    arrive(events, |o| o.order_ts, &mut rng)
}

/// Payments of `block` in arrival order.
pub fn payments(bg: &Background, block: i64) -> Vec<Arriving<Payment>> {
    let mut rng = SplitMix64::new(bg.seed, 0xBABE + block as u64);
    let mut events: Vec<Payment> = background_orders(bg, block)
        .into_iter()
        .map(|o| Payment {
            payment_id: o.order_id.replacen("order-", "pay-", 1),
            order_id: o.order_id,
            paid_amount: o.order_amount,
            payment_ts: o.order_ts + 200 + rng.below(1_300) as i64,
            method: METHODS[rng.below(METHODS.len() as u64) as usize],
        })
        .collect();
    if block == 0 {
        events.extend(planted_pairs().into_iter().map(|(_, p)| p));
        events.push(planted_payment(
            "pay-9002",
            "order-DOES-NOT-EXIST",
            55.0,
            26_557,
            "wallet",
        ));
    }
    let mut rng = SplitMix64::new(bg.seed, 0xB0B0 + block as u64);
    arrive(events, |p| p.payment_ts, &mut rng)
}

fn device(
    index: usize,
    event_type: &'static str,
    status: &'static str,
    offset: i64,
) -> DeviceEvent {
    let (device_id, site_id) = DEVICES[index];
    DeviceEvent {
        device_id,
        site_id,
        event_type,
        status,
        event_ts: T0 + offset,
    }
}

/// Device events of `block` in arrival order.
pub fn devices(bg: &Background, block: i64) -> Vec<Arriving<DeviceEvent>> {
    let mut rng = SplitMix64::new(bg.seed, 0xDE5 + block as u64);
    let mut events = Vec::new();
    for i in 0..bg.per_block() {
        let ts = bg.time_of(&mut rng, block, i);
        if block == 0 && in_gap(ts - T0, -1_500) {
            continue;
        }
        let (device_id, site_id) = DEVICES[(i % DEVICES.len() as u64) as usize];
        let (event_type, status) = if i % 10 == 9 {
            ("firmware_update", "ok")
        } else {
            ("heartbeat", "ok")
        };
        events.push(DeviceEvent {
            device_id,
            site_id,
            event_type,
            status,
            event_ts: ts,
        });
    }
    let mut late = None;
    if block == 0 {
        // Site-b fault spike.
        let faults = [
            31_700, 32_100, 32_600, 33_200, 33_900, 34_500, 35_200, 35_700,
        ];
        for (k, offset) in faults.iter().enumerate() {
            events.push(device(3 + k % 3, "fault", "degraded", *offset));
        }
        // dev-300 reboot loop.
        for offset in [32_500, 33_700, 35_000, 36_300] {
            events.push(device(6, "reboot", "rebooting", offset));
        }
        // dev-100 firmware-failure run.
        events.push(device(0, "firmware_update", "failed", 37_507));
        events.push(device(0, "firmware_update", "failed", 38_407));
        // The event that sets the watermark the late one is judged against.
        events.push(device(2, "heartbeat", "ok", 41_650));
        // Throughput gap boundaries.
        events.push(device(2, "heartbeat", "ok", 44_000));
        events.push(device(0, "heartbeat", "ok", 56_650));
        late = Some(device(1, "heartbeat", "ok", 3_507));
    }
    let mut arriving = arrive(events, |d| d.event_ts, &mut rng);
    if let Some(late) = late {
        // Arrives right after the 41 650 ms event.
        let position = arriving
            .iter()
            .position(|a| a.event.event_ts == T0 + 41_650)
            .map(|p| p + 1)
            .unwrap_or(arriving.len());
        arriving.insert(
            position,
            Arriving {
                arrival: T0 + 41_650,
                seq: u64::MAX,
                event: late,
            },
        );
    }
    arriving
}

/// Assigns arrival times (event time + 0..1500 ms) and sorts by arrival.
/// Planted events at exact offsets that others depend on arrive with no delay.
fn arrive<E>(events: Vec<E>, time: impl Fn(&E) -> i64, rng: &mut SplitMix64) -> Vec<Arriving<E>> {
    let mut arriving: Vec<Arriving<E>> = events
        .into_iter()
        .enumerate()
        .map(|(seq, event)| {
            let t = time(&event);
            let exact = matches!(t - T0, 41_650 | 44_000 | 56_650);
            let delay = if exact {
                0
            } else {
                rng.below(MAX_DELAY_MS) as i64
            };
            Arriving {
                arrival: t + delay,
                seq: seq as u64,
                event,
            }
        })
        .collect();
    arriving.sort_by_key(|a| (a.arrival, a.seq));
    arriving
}
