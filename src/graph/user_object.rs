//! User objects (`cudaUserObject_t`): a Rust value owned by a reference-counted driver object,
//! which graphs and their executables can hold so that the value lives as long as any launch
//! that may use it.

use std::ffi::c_void;
use std::sync::Arc;

use super::Graph;
use crate::context;
use crate::driver::{sys, Raw};
use crate::error::{record, Error, Result};

/// A Rust value owned by a CUDA user object (`cudaUserObjectCreate`), dropped once the last
/// reference is released: this handle's own, its clones', and those graphs hold through
/// [`Graph::retain_user_object`] (which the driver copies to clones and executables of the
/// graph; an executable also takes one of the crate's own, released only once its launches
/// are done, so that no release by hand can drop the value under a queued launch).
///
/// Each handle owns one reference: [`try_clone`](Self::try_clone) takes another
/// (`cudaUserObjectRetain`), drop releases it (`cudaUserObjectRelease`). Each handle also
/// shares the value itself, so [`get`](Self::get) never depends on the driver keeping it (a
/// device reset, say, may end the driver's object early).
///
/// The driver calls the destructor on a thread of its own where no CUDA call is allowed, so
/// the value is not dropped there: it is handed to the crate's queue of deferred releases,
/// and dropped by the next call of the crate that enters a device, on that calling thread
/// (hence `T: Send`; `Sync` because handles on several threads share it). A value whose drop
/// makes CUDA calls (a buffer, say) is therefore safe here.
///
/// ```no_run
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use cuda_runtime::graph::{Graph, UserObject};
/// # fn main() -> cuda_runtime::Result<()> {
/// let dropped = Arc::new(AtomicBool::new(false));
/// struct Flag(Arc<AtomicBool>);
/// impl Drop for Flag {
///     fn drop(&mut self) {
///         self.0.store(true, Ordering::SeqCst);
///     }
/// }
/// let obj = UserObject::new(Flag(dropped.clone()))?;
/// let mut g = Graph::new()?;
/// g.retain_user_object(&obj)?;
/// drop(obj); // the graph still holds a reference
/// assert!(!dropped.load(Ordering::SeqCst));
/// drop(g); // the last one: once the driver runs the destructor, the value is queued and
///          // dropped by the next crate call
/// # Ok(())
/// # }
/// ```
pub struct UserObject<T: Send + Sync + 'static> {
    raw: Raw<sys::CUuserObject_st>,
    value: Arc<T>,
    device: i32,
    generation: u64,
}

impl<T: Send + Sync + 'static> std::fmt::Debug for UserObject<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserObject")
            .field("raw", &self.raw.0)
            .field("device", &self.device)
            .finish()
    }
}

/// The destructor: hands the value to a user thread.
unsafe extern "C" fn release_value<T: Send + Sync + 'static>(p: *mut c_void) {
    // SAFETY: `p` came from `Box::into_raw` in `UserObject::new`, and the driver runs the
    // destructor exactly once.
    let b = unsafe { Box::from_raw(p.cast::<Arc<T>>()) };
    context::defer_release(move || drop(b));
}

impl<T: Send + Sync + 'static> UserObject<T> {
    /// Moves `value` into a new user object on the current device, with one reference: this
    /// handle's (`cudaUserObjectCreate` with `cudaUserObjectNoDestructorSync`).
    #[doc(alias = "cudaUserObjectCreate")]
    pub fn new(value: T) -> Result<UserObject<T>> {
        record((|| {
            let a = context::enter_current()?;
            let value = Arc::new(value);
            let p = Box::into_raw(Box::new(value.clone()));
            let mut obj: sys::CUuserObject = std::ptr::null_mut();
            // SAFETY: valid out-parameter; `p` is a live box that the destructor takes back
            // once; one initial reference; the only flag defined.
            let r = a.check(
                unsafe {
                    sys::cuUserObjectCreate(
                        &mut obj,
                        p.cast(),
                        Some(release_value::<T>),
                        1,
                        sys::CUuserObject_flags_enum::CU_USER_OBJECT_NO_DESTRUCTOR_SYNC as u32,
                    )
                },
                "cuUserObjectCreate",
            );
            if let Err(e) = r {
                // SAFETY: the driver refused the object, so it holds no reference to `p`.
                drop(unsafe { Box::from_raw(p) });
                return Err(e);
            }
            Ok(UserObject {
                raw: Raw(obj),
                value,
                device: a.dev.ordinal,
                generation: a.generation(),
            })
        })())
    }

    /// The value.
    pub fn get(&self) -> &T {
        &self.value
    }

    /// The raw handle (`cudaUserObject_t`).
    pub fn as_raw(&self) -> sys::CUuserObject {
        self.raw.0
    }

    /// The device it was created on.
    pub fn device(&self) -> crate::Device {
        crate::Device::from_ordinal_unchecked(self.device)
    }

    /// Another handle, with its own reference (`cudaUserObjectRetain`).
    #[doc(alias = "cudaUserObjectRetain")]
    pub fn try_clone(&self) -> Result<UserObject<T>> {
        record((|| {
            let a = context::enter_handle(self.device, self.generation, "user object")?;
            // SAFETY: a live user object (this handle owns a reference).
            a.check(
                unsafe { sys::cuUserObjectRetain(self.raw.0, 1) },
                "cuUserObjectRetain",
            )?;
            Ok(UserObject {
                raw: self.raw,
                value: self.value.clone(),
                device: self.device,
                generation: self.generation,
            })
        })())
    }
}

impl<T: Send + Sync + 'static> Drop for UserObject<T> {
    /// Releases this handle's reference (`cudaUserObjectRelease`).
    #[doc(alias = "cudaUserObjectRelease")]
    fn drop(&mut self) {
        let raw = self.raw;
        context::release(
            self.device,
            self.generation,
            "releasing a user object",
            move |a| {
                // SAFETY: this handle's own reference, released once.
                a.check(
                    unsafe { sys::cuUserObjectRelease(raw.get(), 1) },
                    "cuUserObjectRelease",
                )
            },
        );
    }
}

impl Graph {
    /// Gives the graph a reference to `object` (`cudaGraphRetainUserObject`), so that its
    /// value lives while the graph, its clones and executables, and their launches in flight
    /// may use it. The graph releases it when dropped, or earlier through
    /// [`release_user_object`](Self::release_user_object).
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`] for another device's object.
    #[doc(alias = "cudaGraphRetainUserObject")]
    pub fn retain_user_object<T: Send + Sync + 'static>(
        &mut self,
        object: &UserObject<T>,
    ) -> Result<()> {
        const CALL: &str = "cudaGraphRetainUserObject";
        record((|| {
            self.check_object(object, CALL)?;
            let a = self.enter()?;
            let keeper = self.shared.keeper();
            let _l = keeper.objects.lock();
            // SAFETY: live graph and user object (the handle owns a reference); one new
            // reference, not moved from the caller.
            a.check(
                unsafe { sys::cuGraphRetainUserObject(keeper.raw.0, object.raw.0, 1, 0) },
                "cuGraphRetainUserObject",
            )?;
            keeper.extra.note_user_ref(object.raw.0 as usize);
            keeper
                .flags
                .user
                .store(true, std::sync::atomic::Ordering::Release);
            Ok(())
        })())
    }

    /// Releases one reference to `object` that [`retain_user_object`](Self::retain_user_object)
    /// gave this graph (`cudaGraphReleaseUserObject`). Executables and clones made since keep
    /// their own; launches in flight keep theirs until they finish (the executables' references
    /// are the crate's too, released only once their launches are done).
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when this graph holds no such reference (references the crate
    /// takes for what nodes use are never released here); [`Error::DeviceMismatch`].
    #[doc(alias = "cudaGraphReleaseUserObject")]
    pub fn release_user_object<T: Send + Sync + 'static>(
        &mut self,
        object: &UserObject<T>,
    ) -> Result<()> {
        const CALL: &str = "cudaGraphReleaseUserObject";
        record((|| {
            self.check_object(object, CALL)?;
            let key = object.raw.0 as usize;
            let keeper = self.shared.keeper();
            let a = self.enter()?;
            // Taken back under the lock that instantiations and whole updates hold while they
            // take their own references to the objects held by hand (see `keep::HandRefs`).
            let _l = keeper.objects.lock();
            if !keeper.extra.take_user_ref(key) {
                return Err(Error::InvalidValue {
                    what: CALL,
                    value: format!("user object {key:#x}"),
                    reason: "the graph holds no reference to it taken by retain_user_object",
                });
            }
            // SAFETY: live graph and user object; the graph holds a reference taken by hand.
            let r = a.check(
                unsafe { sys::cuGraphReleaseUserObject(keeper.raw.0, object.raw.0, 1) },
                "cuGraphReleaseUserObject",
            );
            if r.is_err() {
                keeper.extra.untake_user_ref(key);
            }
            r
        })())
    }

    fn check_object<T: Send + Sync + 'static>(
        &self,
        object: &UserObject<T>,
        call: &'static str,
    ) -> Result<()> {
        if object.device != self.shared.device {
            return Err(Error::DeviceMismatch {
                call,
                what: "the user object",
                found: object.device,
                expected: self.shared.device,
            });
        }
        if object.generation != self.shared.generation {
            return Err(Error::ContextDestroyed {
                what: "user object",
                device: self.shared.device,
            });
        }
        Ok(())
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<UserObject<Vec<u8>>>();
};
