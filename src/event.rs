//! Events: markers recorded in streams, for synchronisation, cross-stream (and cross-device)
//! waits, and timing.

use std::sync::atomic::{AtomicU64, Ordering};

use bitflags::bitflags;

use crate::context::{self, Active};
use crate::driver::{self, sys, Raw};
use crate::error::{record, Error, Result};
use crate::stream::Stream;

bitflags! {
    /// Event creation flags (`cudaEventCreateWithFlags`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct EventFlags: u32 {
        /// The host blocks on a synchronisation primitive instead of spinning in
        /// [`Event::synchronize`] (`cudaEventBlockingSync`).
        const BLOCKING_SYNC = 0x1;
        /// The event records no timing data, which makes it cheaper (`cudaEventDisableTiming`).
        const DISABLE_TIMING = 0x2;
        /// The event may be shared between processes; requires `DISABLE_TIMING`
        /// (`cudaEventInterprocess`).
        const INTERPROCESS = 0x4;
    }
}

bitflags! {
    /// Flags of [`Event::record_with_flags`] (`cudaEventRecordWithFlags`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct EventRecordFlags: u32 {
        /// During stream capture, record a real event node that others (other graphs, other
        /// streams) can wait on, instead of a capture-internal dependency
        /// (`cudaEventRecordExternal`). Outside capture it records as usual. On a stream
        /// captured by the crate it is refused ([`Error::NotCapturable`]): the node would name
        /// an event the graph cannot keep alive; add one with
        /// [`Graph::add_event_record_node`](crate::Graph::add_event_record_node) instead.
        const EXTERNAL = 0x1;
    }
}

/// A CUDA event (`cudaEvent_t`), created on the current device.
///
/// Destroyed (`cudaEventDestroy`) on drop; as in libcudart, destroying an event whose recorded
/// work is pending is allowed and its resources are released once that work completes.
///
/// An event recorded on a stream being captured ([`crate::graph::capture`]) marks a point of
/// the capture, not of work that runs: until it is recorded again outside a capture, querying,
/// synchronising or waiting for it fails with [`Error::CapturedEvent`] (the runtime fails those
/// calls too), except a wait while its capture is open, which joins the waiting stream to the
/// capture.
#[derive(Debug)]
pub struct Event {
    raw: Raw<sys::CUevent_st>,
    device: i32,
    generation: u64,
    flags: EventFlags,
    /// The id of the capture the event was last recorded in (0: recorded outside a capture,
    /// or never).
    captured: AtomicU64,
    /// Held by a record from its driver call until `captured` says what it did, and by a
    /// stream's wait from reading `captured` until its driver call: a wait never sees the
    /// capture of one record and hands the driver the event of another (a record in a capture
    /// racing on another thread would otherwise join the waiting stream to that capture
    /// without the crate knowing, and its later work would be captured with nothing kept
    /// alive: review finding).
    pub(crate) order: parking_lot::Mutex<()>,
}

/// Events opened from an IPC handle (`cuIpcOpenEventHandle`) whose destroy has not run, by
/// device, context generation and handle: an open that yields a handle this process owns
/// already is refused, never a second owner that would destroy it again.
static OPENED: parking_lot::Mutex<Vec<(i32, u64, Raw<sys::CUevent_st>)>> =
    parking_lot::Mutex::new(Vec::new());

impl Event {
    /// The event that `open` opens from an IPC handle in the entered context `a`, as an owning
    /// [`Event`] with `flags`; `what` names the handle in the error for a handle this process
    /// owns already.
    pub(crate) fn opened(
        a: &Active,
        flags: EventFlags,
        what: impl FnOnce() -> String,
        open: impl FnOnce() -> Result<sys::CUevent>,
    ) -> Result<Event> {
        let (device, generation) = a.id();
        // Held from the open until its owner is registered: a destroy of the same handle runs
        // wholly before or after (see `Drop`).
        let mut opened = OPENED.lock();
        let raw = open()?;
        // Entries of this device's reset contexts are dead (their destroys never ran).
        opened.retain(|&(d, g, _)| d != device || g == generation);
        if opened.contains(&(device, generation, Raw(raw))) {
            // The handle is another `Event`'s: not destroyed here.
            return Err(Error::InvalidValue {
                what: "cudaIpcOpenEventHandle",
                value: format!("{} (opened as event {raw:p})", what()),
                reason: "this process has the event open already, as another Event; a second \
                         one would destroy it again",
            });
        }
        opened.push((device, generation, Raw(raw)));
        Ok(Event {
            raw: Raw(raw),
            device,
            generation,
            flags,
            captured: AtomicU64::new(0),
            order: parking_lot::Mutex::new(()),
        })
    }

    /// Creates an event with default flags on the current device (`cudaEventCreate`).
    #[doc(alias = "cudaEventCreate")]
    pub fn new() -> Result<Event> {
        Event::with_flags(EventFlags::empty())
    }

    /// Creates an event with flags on the current device (`cudaEventCreateWithFlags`).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for `INTERPROCESS` without `DISABLE_TIMING`, as libcudart.
    #[doc(alias = "cudaEventCreateWithFlags")]
    pub fn with_flags(flags: EventFlags) -> Result<Event> {
        record((|| {
            if flags.contains(EventFlags::INTERPROCESS)
                && !flags.contains(EventFlags::DISABLE_TIMING)
            {
                return Err(Error::InvalidValue {
                    what: "event flags",
                    value: format!("{:#x}", flags.bits()),
                    reason: "INTERPROCESS events must also set DISABLE_TIMING",
                });
            }
            let a = context::enter_current()?;
            let mut raw: sys::CUevent = std::ptr::null_mut();
            // SAFETY: the context is current; valid out-parameter; known flag bits only.
            a.check(
                unsafe { sys::cuEventCreate(&mut raw, flags.bits()) },
                "cuEventCreate",
            )?;
            Ok(Event {
                raw: Raw(raw),
                device: a.dev.ordinal,
                generation: a.generation(),
                flags,
                captured: AtomicU64::new(0),
                order: parking_lot::Mutex::new(()),
            })
        })())
    }

    /// The raw driver handle (`CUevent`).
    pub fn as_raw(&self) -> sys::CUevent {
        self.raw.0
    }

    /// The flags the event was created with.
    pub fn flags(&self) -> EventFlags {
        self.flags
    }

    /// The device the event was created on.
    pub fn device(&self) -> crate::Device {
        crate::Device::from_ordinal_unchecked(self.device)
    }

    pub(crate) fn enter(&self) -> Result<Active> {
        context::enter_handle(self.device, self.generation, "event")
    }

    /// The id of the capture the event was last recorded in (0: none).
    pub(crate) fn captured_in(&self) -> u64 {
        self.captured.load(Ordering::SeqCst)
    }

    /// Refuses an event last recorded in a capture.
    fn check_not_captured(&self, call: &'static str) -> Result<()> {
        if self.captured_in() != 0 {
            return Err(Error::CapturedEvent { call });
        }
        Ok(())
    }

    /// The raw handle, with the event's context kept from a reset while the pin lives.
    pub(crate) fn pinned_raw(&self) -> Result<(context::Pinned, sys::CUevent)> {
        let pin = context::pin(self.device, self.generation, "event")?;
        Ok((pin, self.raw.0))
    }

    /// Records the event in `stream` (`cudaEventRecord`): it completes when all work queued in
    /// the stream so far is done. Re-recording replaces the earlier capture. Does not block.
    ///
    /// On a stream being captured, the event marks the capture's current point instead (for
    /// other streams to join the capture, see [`crate::graph::capture`]), and is unusable
    /// outside that capture until recorded again elsewhere.
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`] when the stream belongs to another device than the event, as
    /// libcudart.
    #[doc(alias = "cudaEventRecord")]
    pub fn record(&self, stream: &Stream) -> Result<()> {
        record(self.record_inner(stream, None))
    }

    /// Records the event in `stream` with flags (`cudaEventRecordWithFlags`); see
    /// [`EventRecordFlags`]. Without flags it is [`record`](Self::record).
    ///
    /// # Errors
    /// As [`record`](Self::record); [`Error::InvalidFlags`] for unknown bits.
    #[doc(alias = "cudaEventRecordWithFlags")]
    pub fn record_with_flags(&self, stream: &Stream, flags: EventRecordFlags) -> Result<()> {
        record((|| {
            if EventRecordFlags::from_bits(flags.bits()).is_none() {
                return Err(Error::InvalidFlags {
                    call: "cudaEventRecordWithFlags",
                    flags: flags.bits(),
                    allowed: EventRecordFlags::all().bits(),
                });
            }
            self.record_inner(stream, Some(flags))
        })())
    }

    fn record_inner(&self, stream: &Stream, flags: Option<EventRecordFlags>) -> Result<()> {
        let call = if flags.is_some() {
            "cudaEventRecordWithFlags"
        } else {
            "cudaEventRecord"
        };
        if stream.inner.device != self.device {
            return Err(Error::DeviceMismatch {
                call,
                what: "the stream",
                found: stream.inner.device,
                expected: self.device,
            });
        }
        if stream.inner.generation != self.generation {
            return Err(Error::ContextDestroyed {
                what: "event or stream",
                device: self.device,
            });
        }
        let lane = stream.lane()?;
        let ev = self.raw.0;
        // A record and a stream's wait for this event take turns (see `order`).
        let _order = self.order.lock();
        // Called only on a capturing stream. An external record there is an event record node
        // that names this event at every replay, and the graph could not keep a borrowed
        // event alive (review finding: the event was destroyed while an executable still
        // recorded it). Explicit graphs offer such nodes with a kept `Arc<Event>`.
        let external = flags.is_some_and(|f| f.contains(EventRecordFlags::EXTERNAL));
        let mut keep = || {
            if external {
                return Err(Error::NotCapturable {
                    call,
                    reason: "an external event record in a capture would be a graph node \
                             naming an event the graph cannot keep alive: use \
                             Graph::add_event_record_node",
                });
            }
            Ok(Vec::new())
        };
        let (r, capture) = lane.submit_capturable_id(call, &[], &mut keep, |a, raw| match flags {
            // SAFETY: event and stream are live in the current context (same generation,
            // entered); known flag bits only.
            Some(f) => a.check(
                unsafe { sys::cuEventRecordWithFlags(ev, raw, f.bits()) },
                "cuEventRecordWithFlags",
            ),
            // SAFETY: as above.
            None => a.check(unsafe { sys::cuEventRecord(ev, raw) }, "cuEventRecord"),
        });
        r?;
        // Recorded in a capture: unusable outside it until recorded again elsewhere.
        self.captured.store(capture.unwrap_or(0), Ordering::SeqCst);
        Ok(())
    }

    /// Whether the work the event captured is done (`cudaEventQuery`): `Ok(true)` when done or
    /// never recorded, `Ok(false)` while pending (`cudaErrorNotReady`, not recorded as an error).
    ///
    /// # Errors
    /// [`Error::CapturedEvent`] for an event last recorded in a stream capture.
    #[doc(alias = "cudaEventQuery")]
    pub fn query(&self) -> Result<bool> {
        record((|| {
            self.check_not_captured("cudaEventQuery")?;
            let a = self.enter()?;
            // SAFETY: live event.
            match driver::rc(unsafe { sys::cuEventQuery(self.raw.0) }) {
                0 => Ok(true),
                600 => Ok(false),
                code => Err(a.dev.note(Error::from_driver(code, "cuEventQuery"))),
            }
        })())
    }

    /// Blocks the host until the work the event captured is done (`cudaEventSynchronize`).
    /// Returns at once for an event never recorded.
    ///
    /// # Errors
    /// [`Error::CapturedEvent`] for an event last recorded in a stream capture.
    #[doc(alias = "cudaEventSynchronize")]
    pub fn synchronize(&self) -> Result<()> {
        record((|| {
            self.check_not_captured("cudaEventSynchronize")?;
            let a = self.enter()?;
            // SAFETY: live event.
            a.check(
                unsafe { sys::cuEventSynchronize(self.raw.0) },
                "cuEventSynchronize",
            )
        })())
    }

    /// Milliseconds between two completed events (`cudaEventElapsedTime`), resolution about
    /// half a microsecond.
    ///
    /// # Errors
    /// As libcudart: `cudaErrorInvalidResourceHandle` when either event was created with
    /// `DISABLE_TIMING` or never recorded, `cudaErrorNotReady` while either is pending.
    #[doc(alias = "cudaEventElapsedTime")]
    pub fn elapsed_time(start: &Event, end: &Event) -> Result<f32> {
        record((|| {
            start.check_not_captured("cudaEventElapsedTime")?;
            end.check_not_captured("cudaEventElapsedTime")?;
            let a = start.enter()?;
            if end.device != start.device {
                return Err(Error::DeviceMismatch {
                    call: "cudaEventElapsedTime",
                    what: "the end event",
                    found: end.device,
                    expected: start.device,
                });
            }
            a.expect_generation(end.generation, "event")?;
            let mut ms = 0f32;
            // SAFETY: both events are live in the current context; valid out-parameter.
            a.check(
                unsafe { sys::cuEventElapsedTime_v2(&mut ms, start.raw.0, end.raw.0) },
                "cuEventElapsedTime",
            )?;
            Ok(ms)
        })())
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let raw = self.raw;
        let interprocess = self.flags.contains(EventFlags::INTERPROCESS);
        context::release(
            self.device,
            self.generation,
            "destroying an event",
            move |a| {
                let destroy = || {
                    // SAFETY: the event is live in this context and this was its only handle.
                    a.check(
                        unsafe { sys::cuEventDestroy_v2(raw.get()) },
                        "cuEventDestroy",
                    )
                };
                if !interprocess {
                    return destroy();
                }
                // An opened one is forgotten together with its destroy (see `OPENED`).
                let mut opened = OPENED.lock();
                let r = destroy();
                let (device, generation) = a.id();
                opened.retain(|&e| e != (device, generation, raw));
                r
            },
        );
    }
}
