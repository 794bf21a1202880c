//! The `partitions` array of a snapshot read into `Columns` (`scan.rs` reads the rest):
//! each partition and replica as msgspec's `Partition` and `Replica` accept them, every
//! field present once, no other field, names non-empty; replicas in the collectors'
//! compact form read in one pass of expected bytes, anything else the general way.

use crate::columns::Columns;
use crate::scan::{FnvMap, Scan, NONE};

fn utf8(raw: &[u8]) -> Option<String> {
    std::str::from_utf8(raw).ok().map(str::to_owned)
}

/// Bytes -> index into `names`, each new name checked as UTF-8 once.
fn intern<'a>(raw: &'a [u8], map: &mut FnvMap<&'a [u8], u32>, names: &mut Vec<String>) -> Option<u32> {
    if let Some(&k) = map.get(raw) {
        return Some(k);
    }
    names.push(utf8(raw)?);
    let k = names.len() as u32 - 1;
    map.insert(raw, k);
    Some(k)
}

const TOPIC: u8 = 1;
const NUMBER: u8 = 2;
const LEADER: u8 = 4;
const ISR: u8 = 8;
const REPLICAS: u8 = 16;

/// `[Partition, ...]` as msgspec's `Partition` and `Replica` accept them: every field
/// present once, no other field, names non-empty.
pub fn partitions<'a>(s: &mut Scan<'a>) -> Option<Columns> {
    let mut c = Columns::default();
    // About 80 bytes a replica and 3 replicas a partition in what collectors write.
    let guess = s.b.len() / 80;
    c.broker.reserve(guess);
    c.dir.reserve(guess);
    c.size.reserve(guess);
    c.isr.reserve(guess);
    for v in [&mut c.isr_start, &mut c.rep_start] {
        v.reserve(guess / 3);
    }
    for v in [&mut c.number, &mut c.leader] {
        v.reserve(guess / 3);
    }
    c.topic.reserve(guess / 3);
    let mut topics: FnvMap<&'a [u8], u32> = FnvMap::default();
    let mut dirs: FnvMap<&'a [u8], u32> = FnvMap::default();
    let mut last_topic: (&[u8], u32) = (b"", NONE);
    c.isr_start.push(0);
    c.rep_start.push(0);
    s.eat(b'[')?;
    if s.peek()? == b']' {
        s.i += 1;
        return Some(c);
    }
    loop {
        s.eat(b'{')?;
        let mut seen = 0u8;
        loop {
            let key = s.string()?;
            s.eat(b':')?;
            let bit = match key {
                b"topic" => {
                    let raw = s.string()?;
                    if raw.is_empty() {
                        return None;
                    }
                    if raw != last_topic.0 {
                        last_topic = (raw, intern(raw, &mut topics, &mut c.topics)?);
                    }
                    c.topic.push(last_topic.1);
                    TOPIC
                }
                b"partition" => {
                    c.number.push(s.int(false)?);
                    NUMBER
                }
                b"leader" => {
                    c.leader.push(s.int(true)?);
                    LEADER
                }
                b"isr" => {
                    s.eat(b'[')?;
                    if s.peek()? == b']' {
                        s.i += 1;
                    } else {
                        loop {
                            c.isr.push(s.int(false)?);
                            if !s.more(b']')? {
                                break;
                            }
                        }
                    }
                    c.isr_start.push(c.isr.len() as u32);
                    ISR
                }
                b"replicas" => {
                    replicas(s, &mut c, &mut dirs)?;
                    REPLICAS
                }
                _ => return None,
            };
            once(&mut seen, bit)?;
            if !s.more(b'}')? {
                break;
            }
        }
        if seen != TOPIC | NUMBER | LEADER | ISR | REPLICAS {
            return None;
        }
        if !s.more(b']')? {
            break;
        }
    }
    Some(c)
}

/// One replica written as collectors write it (compact, keys in schema order): its
/// (broker, dir, size), or None to read it the general way from the same place.
fn plain_replica<'a>(
    s: &mut Scan<'a>,
    dirs: &mut FnvMap<&'a [u8], u32>,
    names: &mut Vec<String>,
) -> Option<(i64, u32, i64)> {
    if !s.lit(b"{\"broker\":") {
        return None;
    }
    let broker = s.int(false)?;
    if !s.lit(b",\"log_dir\":") {
        return None;
    }
    let dir = if s.lit(b"null") {
        NONE
    } else {
        let raw = s.string()?;
        if raw.is_empty() {
            return None;
        }
        intern(raw, dirs, names)?
    };
    if !s.lit(b",\"size_bytes\":") {
        return None;
    }
    let size = s.int(false)?;
    s.lit(b"}").then_some((broker, dir, size))
}

fn replicas<'a>(s: &mut Scan<'a>, c: &mut Columns, dirs: &mut FnvMap<&'a [u8], u32>) -> Option<()> {
    s.eat(b'[')?;
    loop {
        s.ws();
        let at = s.i;
        if let Some((broker, dir, size)) = plain_replica(s, dirs, &mut c.dir_names) {
            c.broker.push(broker);
            c.dir.push(dir);
            c.size.push(size);
            if !s.more(b']')? {
                break;
            }
            continue;
        }
        s.i = at;
        s.eat(b'{')?;
        let mut seen = 0u8;
        loop {
            let key = s.string()?;
            s.eat(b':')?;
            let bit = match key {
                b"broker" => {
                    c.broker.push(s.int(false)?);
                    1
                }
                b"log_dir" => {
                    if s.null() {
                        c.dir.push(NONE);
                    } else {
                        let raw = s.string()?;
                        if raw.is_empty() {
                            return None;
                        }
                        c.dir.push(intern(raw, dirs, &mut c.dir_names)?);
                    }
                    2
                }
                b"size_bytes" => {
                    c.size.push(s.int(false)?);
                    4
                }
                _ => return None,
            };
            once(&mut seen, bit)?;
            if !s.more(b'}')? {
                break;
            }
        }
        if seen != 7 {
            return None;
        }
        if !s.more(b']')? {
            break;
        }
    }
    c.rep_start.push(c.broker.len() as u32);
    Some(())
}

/// Marks an object's key seen; None (refused, as a key twice is) when it was already.
fn once(seen: &mut u8, bit: u8) -> Option<()> {
    if *seen & bit != 0 {
        return None;
    }
    *seen |= bit;
    Some(())
}
