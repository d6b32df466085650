//! L2 persistence (programming guide, "L2 cache access management"): a part of L2 set aside for
//! persisting accesses ([`Limit::PersistingL2CacheSize`](crate::Limit::PersistingL2CacheSize)),
//! access policy windows that say which accesses persist, on a stream, and a reset of the
//! persisting lines.
//!
//! A window is a hint to the cache: it names an address range but never makes the device read
//! or write it, so any range is safe to name; the crate checks the hit ratio and the size
//! against the device's limit before the driver sees them.
//!
//! ```no_run
//! use cuda_runtime::{AccessPolicyWindow, AccessProperty, Device, DeviceBuffer, Limit, Stream};
//! # fn main() -> cuda_runtime::Result<()> {
//! let dev = Device::current()?;
//! dev.set_limit(Limit::PersistingL2CacheSize, 4 << 20)?;
//! let hot = DeviceBuffer::<f32>::zeroed(1 << 20)?;
//! let stream = Stream::new()?;
//! let window = AccessPolicyWindow::over(&hot, 0.6, AccessProperty::Persisting, AccessProperty::Streaming);
//! {
//!     let _guard = stream.set_access_policy_window(&window)?;
//!     // ... kernels on `stream` that reuse `hot` while streaming other data ...
//! } // the stream's previous window is back
//! dev.reset_persisting_l2_cache()?;
//! # Ok(()) }
//! ```

use crate::context;
use crate::driver::sys;
use crate::error::{record, Error, Result};
use crate::{Device, DeviceAttribute, DeviceRead, DeviceRepr, Stream};

/// How the L2 cache treats accesses (`cudaAccessProperty`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum AccessProperty {
    /// Normal caching (`cudaAccessPropertyNormal`).
    #[default]
    Normal,
    /// Lines are likely to be evicted first (`cudaAccessPropertyStreaming`).
    Streaming,
    /// Lines persist in the set-aside part of L2 (`cudaAccessPropertyPersisting`).
    Persisting,
}

impl AccessProperty {
    fn to_sys(self) -> sys::CUaccessProperty {
        use sys::CUaccessProperty as P;
        match self {
            AccessProperty::Normal => P::CU_ACCESS_PROPERTY_NORMAL,
            AccessProperty::Streaming => P::CU_ACCESS_PROPERTY_STREAMING,
            AccessProperty::Persisting => P::CU_ACCESS_PROPERTY_PERSISTING,
        }
    }

    fn from_number(n: u32) -> AccessProperty {
        match n {
            1 => AccessProperty::Streaming,
            2 => AccessProperty::Persisting,
            _ => AccessProperty::Normal,
        }
    }
}

/// An access policy window (`cudaAccessPolicyWindow`): of the accesses to
/// `[base, base + num_bytes)`, a `hit_ratio` fraction get `hit_prop`, the others `miss_prop`.
/// A window of 0 bytes is no window.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct AccessPolicyWindow {
    /// First byte of the range (a device address).
    pub base: u64,
    /// Bytes in the range, at most the device's
    /// [`MaxAccessPolicyWindowSize`](DeviceAttribute::MaxAccessPolicyWindowSize).
    pub num_bytes: usize,
    /// Fraction of the accesses that get `hit_prop`, 0 to 1.
    pub hit_ratio: f32,
    /// Property of those accesses.
    pub hit_prop: AccessProperty,
    /// Property of the others.
    pub miss_prop: AccessProperty,
}

impl AccessPolicyWindow {
    /// No window (the stream's default).
    pub const NONE: AccessPolicyWindow = AccessPolicyWindow {
        base: 0,
        num_bytes: 0,
        hit_ratio: 0.0,
        hit_prop: AccessProperty::Normal,
        miss_prop: AccessProperty::Normal,
    };

    /// A window over a buffer or view.
    pub fn over<T: DeviceRepr>(
        memory: &(impl DeviceRead<T> + ?Sized),
        hit_ratio: f32,
        hit_prop: AccessProperty,
        miss_prop: AccessProperty,
    ) -> AccessPolicyWindow {
        AccessPolicyWindow {
            base: memory.device_ptr(),
            num_bytes: memory.len() * std::mem::size_of::<T>(),
            hit_ratio,
            hit_prop,
            miss_prop,
        }
    }

    fn check(&self, device: Device) -> Result<()> {
        let max = device.attribute(DeviceAttribute::MaxAccessPolicyWindowSize)?;
        self.check_against(max.max(0) as usize)
    }

    /// Checks the hit ratio, and the size against the device's largest window (`max` bytes).
    pub(crate) fn check_against(&self, max: usize) -> Result<()> {
        if !self.hit_ratio.is_finite() || !(0.0..=1.0).contains(&self.hit_ratio) {
            return Err(Error::InvalidValue {
                what: "access policy window hit ratio",
                value: self.hit_ratio.to_string(),
                reason: "it must be between 0 and 1",
            });
        }
        if self.num_bytes > max {
            return Err(Error::InvalidValue {
                what: "access policy window size (bytes)",
                value: self.num_bytes.to_string(),
                reason: "it exceeds the device's cudaDevAttrMaxAccessPolicyWindowSize",
            });
        }
        Ok(())
    }

    /// The window of an attribute value the driver wrote for the access-policy-window
    /// attribute (of a stream, a launch or a graph kernel node: one union).
    pub(crate) fn from_value(v: &sys::CUstreamAttrValue) -> AccessPolicyWindow {
        // The window's fields, read as plain numbers through a mirror of its C layout (the
        // properties are enumerations, never read here as Rust enums).
        #[repr(C)]
        struct RawWindow {
            base: *mut std::ffi::c_void,
            num_bytes: usize,
            hit_ratio: f32,
            hit: u32,
            miss: u32,
        }
        // (The window member starts the union.)
        let p = (v as *const sys::CUstreamAttrValue).cast::<RawWindow>();
        // SAFETY: the union is at least as large as the window and starts with it; the
        // driver wrote the window member, whose C layout `RawWindow` mirrors (pointer, size_t,
        // float, two 32-bit enumerations); every field is plain data.
        let w = unsafe { p.read() };
        AccessPolicyWindow {
            base: w.base as usize as u64,
            num_bytes: w.num_bytes,
            hit_ratio: w.hit_ratio,
            hit_prop: AccessProperty::from_number(w.hit),
            miss_prop: AccessProperty::from_number(w.miss),
        }
    }

    pub(crate) fn to_sys(self) -> sys::CUstreamAttrValue {
        // SAFETY: all-zero is a valid value of the attribute union (its padding member).
        let mut v: sys::CUstreamAttrValue = unsafe { std::mem::zeroed() };
        v.accessPolicyWindow = sys::CUaccessPolicyWindow {
            base_ptr: self.base as usize as *mut std::ffi::c_void,
            num_bytes: self.num_bytes,
            hitRatio: self.hit_ratio,
            hitProp: self.hit_prop.to_sys(),
            missProp: self.miss_prop.to_sys(),
        };
        v
    }
}

const WINDOW: sys::CUstreamAttrID =
    sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;

impl Stream {
    /// The stream's access policy window (`cudaStreamGetAttribute` with
    /// `cudaStreamAttributeAccessPolicyWindow`).
    #[doc(alias = "cudaStreamGetAttribute")]
    pub fn access_policy_window(&self) -> Result<AccessPolicyWindow> {
        record((|| {
            let a = self.enter()?;
            // SAFETY: all-zero is a valid value of the union, overwritten by the driver.
            let mut v: sys::CUstreamAttrValue = unsafe { std::mem::zeroed() };
            // SAFETY: a live stream of the entered context; valid out-parameter.
            a.check(
                unsafe { sys::cuStreamGetAttribute(self.as_raw(), WINDOW, &mut v) },
                "cuStreamGetAttribute",
            )?;
            // The window's fields, read as plain numbers through a mirror of its C layout (the
            // properties are enumerations, never read here as Rust enums).
            #[repr(C)]
            struct RawWindow {
                base: *mut std::ffi::c_void,
                num_bytes: usize,
                hit_ratio: f32,
                hit: u32,
                miss: u32,
            }
            // (The window member starts the union.)
            let p = (&v as *const sys::CUstreamAttrValue).cast::<RawWindow>();
            // SAFETY: the driver wrote the window member, whose C layout `RawWindow` mirrors
            // (pointer, size_t, float, two 32-bit enumerations) at the union's start; every
            // field is plain data.
            let w = unsafe { p.read() };
            Ok(AccessPolicyWindow {
                base: w.base as usize as u64,
                num_bytes: w.num_bytes,
                hit_ratio: w.hit_ratio,
                hit_prop: AccessProperty::from_number(w.hit),
                miss_prop: AccessProperty::from_number(w.miss),
            })
        })())
    }

    /// Sets the stream's access policy window (`cudaStreamSetAttribute` with
    /// `cudaStreamAttributeAccessPolicyWindow`) for the work queued on it from now on. The
    /// guard puts the previous window back when dropped ([`AccessPolicyGuard::keep`] keeps the
    /// new one).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a hit ratio outside 0..=1 or a window larger than the
    /// device's `cudaDevAttrMaxAccessPolicyWindowSize`; the driver's errors.
    #[doc(alias = "cudaStreamSetAttribute")]
    pub fn set_access_policy_window(
        &self,
        window: &AccessPolicyWindow,
    ) -> Result<AccessPolicyGuard> {
        let previous = self.access_policy_window()?;
        record((|| {
            window.check(self.device())?;
            set_window(self, window)?;
            Ok(AccessPolicyGuard {
                stream: self.clone(),
                previous: Some(previous),
            })
        })())
    }

    /// Copies `src`'s attributes (its access policy window and the rest) to this stream
    /// (`cudaStreamCopyAttributes`).
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`] for streams of two devices; the driver's errors.
    #[doc(alias = "cudaStreamCopyAttributes")]
    pub fn copy_attributes_from(&self, src: &Stream) -> Result<()> {
        record((|| {
            if src.device() != self.device() {
                return Err(Error::DeviceMismatch {
                    call: "cudaStreamCopyAttributes",
                    what: "the source stream",
                    found: src.device().ordinal(),
                    expected: self.device().ordinal(),
                });
            }
            let a = self.enter()?;
            let _src = src.enter()?;
            a.rebind()?;
            // SAFETY: two live streams of the entered context.
            a.check(
                unsafe { sys::cuStreamCopyAttributes(self.as_raw(), src.as_raw()) },
                "cuStreamCopyAttributes",
            )
        })())
    }
}

fn set_window(stream: &Stream, window: &AccessPolicyWindow) -> Result<()> {
    let a = stream.enter()?;
    let v = window.to_sys();
    // SAFETY: a live stream of the entered context; a valid value.
    a.check(
        unsafe { sys::cuStreamSetAttribute(stream.as_raw(), WINDOW, &v) },
        "cuStreamSetAttribute",
    )
}

/// Puts a stream's previous access policy window back when dropped (see
/// [`Stream::set_access_policy_window`]). A failure then is kept as the device's deferred error.
#[must_use = "dropping the guard at once puts the previous window back"]
#[derive(Debug)]
pub struct AccessPolicyGuard {
    stream: Stream,
    previous: Option<AccessPolicyWindow>,
}

impl AccessPolicyGuard {
    /// Keeps the new window after the guard (nothing is put back).
    pub fn keep(mut self) {
        self.previous = None;
    }
}

impl Drop for AccessPolicyGuard {
    fn drop(&mut self) {
        let Some(previous) = self.previous.take() else {
            return;
        };
        if context::in_host_fn() {
            return;
        }
        if let Err(e) = set_window(&self.stream, &previous) {
            if let Ok(d) = context::device_state(self.stream.device().ordinal()) {
                d.defer("restoring a stream's access policy window", e);
            }
        }
    }
}

impl Device {
    /// Demotes every persisting L2 line of the device to normal
    /// (`cudaCtxResetPersistingL2Cache`, on this device's primary context).
    #[doc(alias = "cudaCtxResetPersistingL2Cache")]
    pub fn reset_persisting_l2_cache(self) -> Result<()> {
        record((|| {
            let a = context::enter(self.ordinal())?;
            // SAFETY: the entered context is current.
            a.check(
                unsafe { sys::cuCtxResetPersistingL2Cache() },
                "cuCtxResetPersistingL2Cache",
            )
        })())
    }
}
