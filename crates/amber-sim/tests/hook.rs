//! The fence hook sees each crash point just before its fence takes effect,
//! and injected drain failures poison the device.

use amber_pmem::PmDevice;
use amber_sim::{CrashPoint, RecordingDevice};
use parking_lot::Mutex;
use std::sync::{Arc, Weak};

fn recorder(dev: &RecordingDevice) -> Arc<Mutex<Vec<CrashPoint>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    dev.set_fence_hook(Some(Box::new(move |p: &CrashPoint| {
        sink.lock().push(p.clone())
    })));
    dev.arm_fence_hook(true);
    seen
}

#[test]
fn hook_runs_before_each_drain_with_the_pending_stores() {
    let dev = RecordingDevice::new(4096);
    let seen = recorder(&dev);
    dev.write(0, b"A");
    dev.flush(0, 1);
    dev.drain().unwrap();
    dev.write(64, b"B");
    dev.flush(64, 1);
    dev.drain().unwrap();

    let seen = seen.lock();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].fence(), 0);
    assert_eq!(seen[0].durable()[0], 0, "the crash precedes the fence");
    assert_eq!(seen[0].lines().len(), 1);
    assert_eq!(seen[0].lines()[0].line(), 0);
    assert_eq!(seen[0].lines()[0].prefix(1)[0], b'A');
    assert_eq!(seen[1].fence(), 1);
    assert_eq!(seen[1].durable()[0], b'A', "the first fence took effect");
    assert_eq!(seen[1].lines()[0].line(), 1);
    assert_eq!(seen[1].lines()[0].prefix(1)[0], b'B');
}

#[test]
fn a_kept_snapshot_is_not_changed_by_later_fences() {
    let dev = RecordingDevice::new(4096);
    let seen = recorder(&dev);
    dev.write_persist(0, &[1; 64]).unwrap();
    dev.write_persist(0, &[2; 64]).unwrap();
    let seen = seen.lock();
    assert_eq!(seen[0].durable()[0], 0);
    assert_eq!(seen[1].durable()[0], 1);
    assert_eq!(dev.durable_image()[0], 2);
}

#[test]
fn disarmed_hook_is_not_called() {
    let dev = RecordingDevice::new(4096);
    let seen = recorder(&dev);
    dev.arm_fence_hook(false);
    dev.write_persist(0, &[1]).unwrap();
    dev.arm_fence_hook(true);
    dev.write_persist(0, &[2]).unwrap();
    dev.set_fence_hook(None);
    dev.write_persist(0, &[3]).unwrap();
    let seen = seen.lock();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].fence(),
        1,
        "fences are numbered even when not hooked"
    );
    assert_eq!(dev.fences(), 3);
}

#[test]
fn the_hook_may_read_the_device() {
    let dev = Arc::new(RecordingDevice::new(4096));
    let weak: Weak<RecordingDevice> = Arc::downgrade(&dev);
    let reads = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&reads);
    dev.set_fence_hook(Some(Box::new(move |_: &CrashPoint| {
        let dev = weak.upgrade().expect("device alive");
        sink.lock().push(dev.load_u64(0));
    })));
    dev.arm_fence_hook(true);
    dev.store_u64(0, 5);
    dev.persist(0, 8).unwrap();
    assert_eq!(*reads.lock(), vec![5]);
}

#[test]
#[should_panic(expected = "drained the device it observes")]
fn a_hook_that_drains_its_device_is_reported() {
    let dev = Arc::new(RecordingDevice::new(4096));
    let weak = Arc::downgrade(&dev);
    dev.set_fence_hook(Some(Box::new(move |_: &CrashPoint| {
        let _ = weak.upgrade().expect("device alive").drain();
    })));
    dev.arm_fence_hook(true);
    let _ = dev.drain();
}

#[test]
fn an_injected_failure_poisons_every_later_drain() {
    let dev = RecordingDevice::new(4096);
    dev.fail_drain_after(2);
    dev.write_persist(0, &[1]).unwrap();
    dev.write(64, &[2]);
    dev.flush(64, 1);
    let err = dev.drain().unwrap_err();
    assert!(err.reason.contains("injected"), "{err}");
    assert!(dev.is_poisoned());
    assert_eq!(
        dev.durable_image()[64],
        0,
        "the failed fence made nothing durable"
    );
    assert!(dev.write_persist(128, &[3]).is_err());
    assert!(dev.drain().unwrap_err().reason.contains("poisoned"));
    assert_eq!(dev.durable_image()[0], 1);
}

#[test]
#[should_panic(expected = "counts from 1")]
fn failing_the_zeroth_drain_is_a_caller_bug() {
    RecordingDevice::new(4096).fail_drain_after(0);
}
