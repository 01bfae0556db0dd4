//! The PM emulator: spec text and the costs it applies.

use std::time::{Duration, Instant};

use amber_pmem::{Emulated, EmulatorSpec, MapOptions, MmapDevice, Per, PmDevice};

fn dram(size: u64) -> MmapDevice {
    MmapDevice::anonymous(size, &MapOptions::default()).unwrap()
}

fn emulated(spec: &str) -> Emulated<MmapDevice> {
    Emulated::new(dram(4 << 20), EmulatorSpec::parse(spec).unwrap())
}

fn timed(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

#[test]
fn presets_and_custom_specs_parse() {
    assert_eq!(EmulatorSpec::parse("pcm").unwrap(), EmulatorSpec::pcm());
    assert_eq!(
        EmulatorSpec::parse("lat=200ns,per=line,bw=1GB/s").unwrap(),
        EmulatorSpec::pcm()
    );
    assert_eq!(
        EmulatorSpec::parse(" Latency = 1.5us , PER=Fence, bandwidth=none ").unwrap(),
        EmulatorSpec {
            latency_ns: 1500,
            per: Per::Fence,
            bandwidth_bytes_per_sec: None
        }
    );
    let optane_slow = EmulatorSpec::parse("optane,bw=512KiB/s").unwrap();
    assert_eq!(optane_slow.latency_ns, 90);
    assert_eq!(optane_slow.bandwidth_bytes_per_sec, Some(512 * 1024));
    assert_eq!(
        EmulatorSpec::parse("bw=2.5GiB/s")
            .unwrap()
            .bandwidth_bytes_per_sec,
        Some(5 << 29)
    );
    assert_eq!(
        EmulatorSpec::parse("lat=3ms").unwrap().latency_ns,
        3_000_000
    );
    assert_eq!(EmulatorSpec::parse("dram").unwrap(), EmulatorSpec::dram());
    for name in EmulatorSpec::PRESETS {
        assert!(EmulatorSpec::preset(name).is_some(), "{name}");
    }
}

#[test]
fn display_round_trips() {
    assert_eq!(
        EmulatorSpec::pcm().to_string(),
        "lat=200ns,per=line,bw=1GB/s"
    );
    let customs = [
        "lat=0ns,per=line,bw=none",
        "lat=2us,per=fence,bw=3MiB/s",
        "lat=1500ns,per=line,bw=1234B/s",
        "lat=7ns,per=fence,bw=2300MB/s",
    ];
    let specs = EmulatorSpec::PRESETS
        .iter()
        .map(|n| EmulatorSpec::preset(n).unwrap())
        .chain(customs.iter().map(|s| s.parse().unwrap()));
    for spec in specs {
        let text = spec.to_string();
        assert_eq!(EmulatorSpec::parse(&text).unwrap(), spec, "{text}");
    }
    for text in customs {
        assert_eq!(EmulatorSpec::parse(text).unwrap().to_string(), text);
    }
}

#[test]
fn bad_specs_are_rejected_with_reasons() {
    let cases = [
        ("", "empty"),
        ("lat=200", "needs a unit"),
        ("lat=200xs", "unknown unit"),
        ("bw=5GB", "needs a unit"),
        ("lat=-5ns", "non-negative number"),
        ("lat=1.2.3us", "not a valid duration"),
        ("per=sometimes", "line` or `fence"),
        ("bw=0GB/s", "must be positive"),
        ("bw=fast", "positive number"),
        ("bw=99999999999999999999GB/s", "not a valid bandwidth"),
        ("nvram", "neither a preset"),
        ("lat=1ns,lat=2ns", "given twice"),
        ("lat=1ns,pcm", "must come first"),
        ("color=blue", "unknown key"),
        ("lat=1ns,,bw=none", "empty item"),
    ];
    for (input, reason) in cases {
        let err = EmulatorSpec::parse(input).expect_err(input);
        let text = err.to_string();
        assert!(text.contains(reason), "{input:?}: {text}");
        assert!(text.contains("lat=200ns,per=line,bw=1GB/s"), "{text}");
    }
}

#[test]
fn per_line_latency_is_paid_on_flush() {
    let dev = emulated("lat=10us,per=line");
    let took = timed(|| dev.flush(0, 1000 * 64));
    assert!(took >= Duration::from_millis(5), "{took:?}");
}

#[test]
fn per_line_latency_is_paid_on_non_temporal_stores() {
    let dev = emulated("lat=10us,per=line");
    let data = vec![7; 1000 * 64];
    let took = timed(|| dev.write_nt(0, &data));
    assert!(took >= Duration::from_millis(5), "{took:?}");
    let took = timed(|| dev.zero_nt(0, 1000 * 64));
    assert!(took >= Duration::from_millis(5), "{took:?}");
}

#[test]
fn per_fence_latency_is_paid_on_drain_only() {
    let dev = emulated("lat=1ms,per=fence");
    let flush = timed(|| dev.flush(0, 1 << 20));
    assert!(flush < Duration::from_millis(1000), "{flush:?}");
    let took = timed(|| {
        for _ in 0..10 {
            dev.drain().unwrap();
        }
    });
    assert!(took >= Duration::from_millis(5), "{took:?}");
}

#[test]
fn bandwidth_limits_all_kinds_of_stores() {
    // 100 kB at 10 MB/s is 10 ms, paid by the fence after the stores.
    let dev = emulated("bw=10MB/s");
    let took = timed(|| {
        dev.write(0, &[1; 100_000]);
        dev.drain().unwrap();
    });
    assert!(took >= Duration::from_millis(5), "write {took:?}");
    let took = timed(|| {
        dev.write_nt(0, &[1; 100_000]);
        dev.drain().unwrap();
    });
    assert!(took >= Duration::from_millis(5), "write_nt {took:?}");
    // 1000 16-byte atomic stores at 1 MB/s is 16 ms.
    let dev = emulated("bw=1MB/s");
    let took = timed(|| {
        for i in 0..1000 {
            dev.store_u128(i * 16, 1);
        }
        dev.drain().unwrap();
    });
    assert!(took >= Duration::from_millis(8), "store_u128 {took:?}");
}

/// A thread's stores and flushes are paid at its fence, in one wait: 100
/// lines of 20 us each cost their 2 ms whether each is fenced or all
/// share one fence.
#[test]
fn owed_latency_is_paid_at_the_fence() {
    let dev = emulated("lat=20us,per=line");
    let took = timed(|| {
        for i in 0..100 {
            dev.flush(i * 64, 64);
        }
        dev.drain().unwrap();
    });
    assert!(took >= Duration::from_millis(2), "{took:?}");
    let took = timed(|| {
        for i in 0..100 {
            dev.store_u64(i * 64, i);
            dev.persist(i * 64, 8).unwrap();
        }
    });
    assert!(took >= Duration::from_millis(2), "{took:?}");
}

/// What a thread owes is bounded: a long run of flushes with no fence
/// waits along the way (5,000 lines of 1 us: 5 ms, past the 1 ms bound).
#[test]
fn a_run_without_a_fence_still_pays() {
    let dev = emulated("lat=1us,per=line");
    let took = timed(|| {
        for i in 0..5000 {
            dev.flush((i % 1000) * 64, 64);
        }
    });
    assert!(took >= Duration::from_millis(3), "{took:?}");
}

#[test]
fn bandwidth_is_one_bucket_shared_by_threads() {
    // Two threads of 50 kB each at 10 MB/s share 10 ms; separate buckets
    // would finish in 5 ms.
    let dev = emulated("bw=10MB/s");
    let took = timed(|| {
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let dev = &dev;
                s.spawn(move || {
                    for i in 0..50u64 {
                        dev.write((t * 50 + i) * 1000, &[2; 1000]);
                        dev.drain().unwrap();
                    }
                });
            }
        })
    });
    assert!(took >= Duration::from_millis(9), "{took:?}");
}

#[test]
fn emulator_forwards_data_and_stats() {
    let dev = emulated("pcm");
    dev.write_persist(100, b"hello").unwrap();
    dev.store_u64(64, 42);
    let mut buf = [0; 5];
    dev.read(100, &mut buf);
    assert_eq!(&buf, b"hello");
    assert_eq!(dev.load_u64(64), 42);
    assert_eq!(dev.stats(), dev.inner().stats());
    assert_eq!(dev.stats().bytes_stored, 13);
    assert_eq!(dev.stats().fences, 1);
    assert_eq!(dev.size(), 4 << 20);
    assert_eq!(*dev.spec(), EmulatorSpec::pcm());
}
