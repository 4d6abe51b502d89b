//! What the bridge has passed on of one run's text, in bounded memory.
//!
//! OpenClaw's gateway sends a run's whole text so far with every chunk
//! (`message`), and the bridge sends the editor only what extends the text
//! it already sent. Keeping that text whole let a gateway grow the bridge
//! without bound (a hostile one drove it to 755 MB). What is kept instead
//! is the text's length, a hash of all of it but its last few KB, and
//! those last bytes: enough to tell whether a new snapshot extends,
//! repeats or rewrites what was sent, in memory that does not grow with
//! the run.

/// The most bytes of the text's end kept as they are (up to twice as many
/// between compactions).
const WINDOW: usize = 4096;

/// FNV-1a's 64-bit offset basis and prime. The hash only tells news from
/// what was sent (a gateway that wanted to fool it could as well send
/// other text): it need not withstand an adversary, and FNV can go on from
/// where it stopped, which the head's hash needs as the window slides.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(mut hash: u64, bytes: &[u8]) -> u64 {
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

/// The text passed on so far, as its length, the hash of its head and its
/// tail.
#[derive(Debug)]
pub struct Sent {
    len: usize,
    /// FNV-1a of the text's first `len - tail.len()` bytes.
    head: u64,
    tail: String,
}

impl Default for Sent {
    fn default() -> Self {
        Self {
            len: 0,
            head: FNV_OFFSET,
            tail: String::new(),
        }
    }
}

impl Sent {
    /// `more` was passed on after what was.
    pub fn push(&mut self, more: &str) {
        self.len += more.len();
        self.tail.push_str(more);
        if self.tail.len() > 2 * WINDOW {
            let mut cut = self.tail.len() - WINDOW;
            while !self.tail.is_char_boundary(cut) {
                cut -= 1;
            }
            self.head = fnv(self.head, &self.tail.as_bytes()[..cut]);
            // A new string, so that one huge chunk leaves no huge buffer.
            self.tail = self.tail[cut..].to_string();
        }
    }

    /// The text is `text` from now on (the gateway replaced it).
    pub fn reset(&mut self, text: &str) {
        *self = Self::default();
        self.push(text);
    }

    /// Moves to the snapshot `now` and returns what it adds to what was
    /// passed on. A snapshot that is a prefix of it adds nothing; one that
    /// rewrites it is taken as the new base without sending anything,
    /// since an editor cannot take text back. (A prefix shorter than the
    /// hashed head cannot be told from a rewrite and is taken as one.)
    pub fn advance(&mut self, now: &str) -> Option<String> {
        let split = self.len - self.tail.len();
        let head_matches = now.len() >= split
            && now.is_char_boundary(split)
            && fnv(FNV_OFFSET, &now.as_bytes()[..split]) == self.head;
        if head_matches {
            let rest = &now[split..];
            if let Some(new) = rest.strip_prefix(self.tail.as_str()) {
                if new.is_empty() {
                    return None;
                }
                let new = new.to_string();
                self.push(&new);
                return Some(new);
            }
            if self.tail.starts_with(rest) {
                return None;
            }
        }
        self.reset(now);
        None
    }

    /// The bytes it holds on the heap, whatever the text's length.
    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        self.tail.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn snapshots_of_a_long_text_give_each_byte_once_in_bounded_memory() {
        let mut sent = Sent::default();
        let mut whole = String::new();
        let mut passed = String::new();
        let mut most = 0;
        // 1 MB in 200 growing snapshots of mixed-width characters.
        for n in 0..200 {
            whole.push_str(&format!("{n}: Ünïcode ✓ 🦀 ").repeat(250));
            if let Some(new) = sent.advance(&whole) {
                passed.push_str(&new);
            }
            // A repeat, and an older snapshot, add nothing.
            assert_eq!(sent.advance(&whole), None);
            let mut older = whole.len() - 40;
            while !whole.is_char_boundary(older) {
                older -= 1;
            }
            assert_eq!(sent.advance(&whole[..older]), None);
            most = most.max(sent.heap_bytes());
        }
        assert!(whole.len() > 1_000_000, "{}", whole.len());
        assert_eq!(passed.len(), whole.len());
        assert!(passed == whole);
        assert!(most <= 4 * WINDOW, "{most} bytes kept");
    }

    #[test]
    fn a_rewrite_sends_nothing_and_goes_on_from_it() {
        let mut sent = Sent::default();
        let long = "x".repeat(3 * WINDOW);
        assert_eq!(sent.advance(&long), Some(long.clone()));
        // Same length, other text in the hashed head: a rewrite.
        let other = format!("y{}", &long[1..]);
        assert_eq!(sent.advance(&other), None);
        assert_eq!(sent.advance(&format!("{other}!")), Some("!".to_string()));
        // Shorter, not a prefix: a rewrite, from which it goes on.
        assert_eq!(sent.advance("Hi"), None);
        assert_eq!(sent.advance("Hi there"), Some(" there".to_string()));
    }

    #[test]
    fn deltas_pushed_extend_what_snapshots_are_compared_with() {
        let mut sent = Sent::default();
        let mut whole = String::new();
        for n in 0..5000 {
            let piece = format!("{n} ");
            whole.push_str(&piece);
            sent.push(&piece);
        }
        assert!(sent.heap_bytes() <= 4 * WINDOW);
        assert_eq!(sent.advance(&whole), None);
        assert_eq!(
            sent.advance(&format!("{whole}end")),
            Some("end".to_string())
        );
    }
}
