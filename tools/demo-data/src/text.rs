//! Support notes: short agent write-ups assembled from sentence templates and a few hundred words.
//!
//! Every sentence fills two to five slots from word lists of 10-50 entries and many carry a number,
//! so two notes rarely share more than the template glue: random pairs stay far below a Jaccard of
//! 0.5 over character 5-grams, and the planted near-duplicates (one word swapped) stay above 0.8.
//! In 200,000 notes hardly any pair reaches 0.8 by chance (see MIN_SENTENCES).

use rand::seq::IndexedRandom;
use rand::{Rng, RngExt};

const AREAS: &[&str] = &[
    "billing",
    "the invoice page",
    "the dashboard",
    "scheduled reports",
    "CSV export",
    "the public API",
    "webhooks",
    "the mobile app",
    "single sign-on",
    "user permissions",
    "push notifications",
    "global search",
    "onboarding checklist",
    "data import",
    "the Salesforce integration",
    "calendar sync",
    "the audit log",
    "workspace settings",
    "file uploads",
    "usage analytics",
    "seat management",
    "checkout",
    "password reset",
    "two-factor login",
    "the weekly digest",
    "the chart builder",
    "the Slack connector",
    "custom fields",
    "project templates",
    "the task scheduler",
    "offline mode",
    "saved payment methods",
    "usage limits",
    "storage quota",
    "the admin console",
    "the sandbox",
    "the billing portal",
    "tax settings",
    "the form builder",
    "role mapping",
    "bulk editing",
    "the desktop client",
    "email templates",
    "the approval flow",
    "the Zapier app",
    "data retention",
    "guest access",
    "the status page",
];

const ISSUES: &[&str] = &[
    "was slow to load",
    "kept timing out",
    "showed the wrong totals",
    "crashed right after the update",
    "lost unsaved changes",
    "created duplicate entries",
    "rejected a valid card",
    "returned a server error",
    "ignored the new role",
    "sent reminders twice",
    "stopped syncing",
    "displayed stale numbers",
    "logged people out randomly",
    "charged the old price",
    "failed silently",
    "skipped several rows",
    "rendered a blank screen",
    "mixed up time zones",
    "hit the rate limit",
    "dropped attachments",
    "exported garbled characters",
    "needed a hard refresh",
    "froze on large files",
    "did not accept the coupon",
    "showed another tenant's logo",
    "ran out of quota early",
    "could not find archived items",
    "sorted dates as text",
    "broke the saved filters",
    "reverted to defaults",
    "refused the SAML metadata",
    "truncated long names",
    "double counted refunds",
    "lagged behind by hours",
    "flagged legitimate logins",
    "lost the column order",
    "miscalculated prorated charges",
    "threw a permissions warning",
];

const SUBJECTS: &[&str] = &[
    "Customer",
    "The admin",
    "Their finance lead",
    "A team member",
    "The account owner",
    "An engineer on their side",
    "The new office manager",
    "Their IT contact",
    "The founder",
    "A contractor",
    "The operations lead",
    "Their accountant",
    "The project coordinator",
    "A support rep on their team",
    "The marketing manager",
    "Their security officer",
    "The billing contact",
    "A regional manager",
    "The data analyst",
    "Their procurement team",
];

const ACTIONS: &[&str] = &[
    "walked them through the workaround",
    "escalated the case to tier two",
    "shared the relevant help article",
    "issued a partial credit",
    "reset the sync token",
    "filed a bug with engineering",
    "cleared the cached session",
    "reprocessed the failed payment",
    "restored the deleted items from backup",
    "raised their rate limit temporarily",
    "merged the duplicate accounts",
    "updated the tax region",
    "reissued the invoice",
    "rotated the API key",
    "scheduled a screen share",
    "reverted the plan change",
    "added the missing seats",
    "enabled the beta flag",
    "corrected the billing address",
    "reconnected the integration",
    "extended the trial",
    "exported the raw logs",
    "reassigned the workspace owner",
    "unlocked the account",
    "fixed the role mapping by hand",
    "sent a refund for the overcharge",
    "rebuilt the search index",
    "waived the late fee",
    "reran the import with cleaned data",
    "opened a ticket with the payment processor",
    "confirmed the fix in staging",
    "recorded a short video guide",
];

const HAPPY: &[&str] = &[
    "seemed satisfied with the fix",
    "thanked us for the quick reply",
    "said the team loves the new layout",
    "plans to add more seats next quarter",
    "was happy with the response time",
    "called the onboarding painless",
    "is considering the annual plan",
    "praised the documentation",
    "said everything works again",
    "offered to join a customer interview",
    "recommended us to a partner firm",
    "liked the new reporting options",
];

const UNHAPPY: &[&str] = &[
    "sounded frustrated",
    "mentioned evaluating a competitor",
    "asked how to cancel",
    "complained about the price increase",
    "threatened to downgrade",
    "said this is the third time",
    "is unhappy with response times",
    "questioned the value of the plan",
    "wants a discount to stay",
    "asked for a data export before leaving",
    "said their budget was cut",
    "called the last release a step backwards",
];

const REQUESTS: &[&str] = &[
    "asked for a bulk edit option",
    "requested an annual plan quote",
    "wants more granular permissions",
    "asked about a dark theme",
    "requested a Spanish translation",
    "wants audit exports in JSON",
    "asked whether an on-premise version exists",
    "requested a dedicated account manager",
    "wants webhooks for deleted records",
    "asked for longer data retention",
    "requested invoices in euros",
    "wants to pay by bank transfer",
    "asked about HIPAA compliance",
    "requested a sandbox copy of production",
    "wants keyboard shortcuts for approvals",
    "asked for a usage report per department",
    "requested priority support",
    "wants read-only guest links",
];

const WHEN: &[&str] = &[
    "since Monday",
    "after the latest release",
    "twice this week",
    "during their quarterly close",
    "every morning",
    "over the weekend",
    "right after onboarding",
    "since the migration",
    "for about ten days",
    "whenever they invite guests",
    "during peak hours",
    "after switching plans",
    "at the end of each month",
    "since their card expired",
    "after the password change",
    "once the trial ended",
    "on the first login",
    "intermittently",
    "after the browser update",
    "since yesterday afternoon",
];

const WHERE: &[&str] = &[
    "on Android",
    "in Safari",
    "on the desktop client",
    "from the Berlin office",
    "behind their corporate proxy",
    "on older iPads",
    "in Firefox",
    "over the hotel wifi",
    "for users in Brazil",
    "on the shared kiosk",
    "with a VPN enabled",
    "on Windows laptops",
    "in the Chrome extension",
    "from the warehouse scanners",
    "for the Singapore team",
    "in the embedded widget",
    "on slow connections",
    "for external auditors",
];

const FOLLOW_UPS: &[&str] = &[
    "in two days",
    "next week",
    "after the patch ships",
    "once engineering replies",
    "before their renewal",
    "on Friday",
    "after the holidays",
    "when the invoice posts",
    "if the error returns",
    "at the end of the sprint",
];

/// Ordinary words used to swap one word of a note for a near-duplicate.
const SWAPS: &[&str] = &[
    "again", "client", "urgent", "records", "monthly", "several", "account", "quickly", "partner",
    "regional", "internal", "multiple", "pending", "shared", "billing", "support",
];

/// Sentences per note at least: with fewer, 200,000 short notes hold a few pairs that differ in
/// one slot only and so look like planted near-duplicates.
const MIN_SENTENCES: usize = 3;

/// A note of three or more sentences and at most `max_words` words, at least `min_words` (at most
/// `max_words - 14`) when three sentences fall short, unhappier in tone as `unhappy` grows (a
/// log-odds shift; 0 is neutral).
pub fn note<R: Rng + ?Sized>(
    rng: &mut R,
    min_words: usize,
    max_words: usize,
    unhappy: f64,
) -> String {
    let target = rng.random_range(min_words..=max_words);
    'attempt: loop {
        let mut text = String::new();
        let (mut words, mut sentences) = (0, 0);
        while words < target || sentences < MIN_SENTENCES {
            let sentence = sentence(rng, sentences == 0, unhappy);
            let sentence_words = sentence.split_whitespace().count();
            if words + sentence_words > max_words {
                if words >= min_words && sentences >= MIN_SENTENCES {
                    break;
                }
                if max_words - words >= 8 {
                    continue;
                }
                // Long first sentences can leave no room for the rest: start over.
                continue 'attempt;
            }
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(&sentence);
            words += sentence_words;
            sentences += 1;
        }
        return text;
    }
}

/// One sentence. The first sentence of a note always states the problem.
fn sentence<R: Rng + ?Sized>(rng: &mut R, first: bool, unhappy: f64) -> String {
    let pick = |rng: &mut R, list: &[&'static str]| *list.choose(rng).unwrap_or(&"");
    let kind = if first {
        rng.random_range(0..3)
    } else {
        rng.random_range(0..10)
    };
    match kind {
        0 => format!(
            "{} reported that {} {} {} {}.",
            pick(rng, SUBJECTS),
            pick(rng, AREAS),
            pick(rng, ISSUES),
            pick(rng, WHERE),
            pick(rng, WHEN)
        ),
        1 => capitalized(&format!(
            "{} {} {}, {} users affected.",
            pick(rng, AREAS),
            pick(rng, ISSUES),
            pick(rng, WHERE),
            rng.random_range(1..=250)
        )),
        2 => format!(
            "Ticket {} about {}: it {} {}.",
            rng.random_range(10_000..100_000),
            pick(rng, AREAS),
            pick(rng, ISSUES),
            pick(rng, WHERE)
        ),
        3 | 4 => format!("Agent {} and {}.", pick(rng, ACTIONS), pick(rng, ACTIONS)),
        5 | 6 => {
            let p_unhappy = 1.0 / (1.0 + (-unhappy).exp());
            let list = if rng.random_bool(p_unhappy) {
                UNHAPPY
            } else {
                HAPPY
            };
            format!(
                "{} {} {}.",
                pick(rng, SUBJECTS),
                pick(rng, list),
                pick(rng, WHEN)
            )
        }
        7 => format!(
            "{} {} {}.",
            pick(rng, SUBJECTS),
            pick(rng, REQUESTS),
            pick(rng, WHERE)
        ),
        8 => format!(
            "Follow up {} about {} (case {}).",
            pick(rng, FOLLOW_UPS),
            pick(rng, AREAS),
            rng.random_range(100..10_000)
        ),
        _ => format!(
            "Also noticed {} {} {}.",
            pick(rng, AREAS),
            pick(rng, ISSUES),
            pick(rng, WHEN)
        ),
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The same note in a different dress: the first word upper-cased and one space doubled. Equal to
/// `note` after lower-casing and collapsing white space, never equal byte for byte.
pub fn restyled<R: Rng + ?Sized>(rng: &mut R, note: &str) -> String {
    let words: Vec<&str> = note.split(' ').collect();
    let doubled = if words.len() > 1 {
        rng.random_range(1..words.len())
    } else {
        0
    };
    let mut out = String::with_capacity(note.len() + 2);
    for (index, word) in words.iter().enumerate() {
        if index > 0 {
            out.push_str(if index == doubled { "  " } else { " " });
        }
        if index == 0 {
            out.push_str(&word.to_uppercase());
        } else {
            out.push_str(word);
        }
    }
    if out == note {
        out.push_str("  ");
    }
    out
}

/// `note` with one word of four or more letters replaced by a different word.
pub fn one_word_swapped<R: Rng + ?Sized>(rng: &mut R, note: &str) -> String {
    let words: Vec<&str> = note.split(' ').collect();
    let candidates: Vec<usize> = (0..words.len())
        .filter(|&i| words[i].len() >= 4 && words[i].chars().all(|c| c.is_ascii_lowercase()))
        .collect();
    let Some(&target) = candidates.choose(rng) else {
        return format!("{note} Update.");
    };
    let replacement = loop {
        let word = *SWAPS.choose(rng).unwrap_or(&"again");
        if word != words[target] {
            break word;
        }
    };
    let mut swapped: Vec<&str> = words;
    swapped[target] = replacement;
    swapped.join(" ")
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use std::collections::HashSet;

    /// Lower-cased, white space collapsed: what a duplicate check compares.
    pub fn normalized(note: &str) -> String {
        note.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    }

    /// Jaccard similarity of the sets of character 5-grams of the normalized texts.
    pub fn jaccard_5grams(a: &str, b: &str) -> f64 {
        let grams = |text: &str| -> HashSet<Vec<char>> {
            let chars: Vec<char> = normalized(text).chars().collect();
            chars.windows(5).map(<[char]>::to_vec).collect()
        };
        let (a, b) = (grams(a), grams(b));
        let union = a.union(&b).count();
        if union == 0 {
            return 1.0;
        }
        a.intersection(&b).count() as f64 / union as f64
    }

    #[test]
    fn notes_have_at_most_40_words_and_are_mostly_distinct() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let notes: Vec<String> = (0..4000).map(|_| note(&mut rng, 8, 40, 0.0)).collect();
        for note in &notes {
            let words = note.split_whitespace().count();
            assert!((8..=40).contains(&words), "{words} words: {note}");
        }
        let distinct: HashSet<String> = notes.iter().map(|n| normalized(n)).collect();
        assert_eq!(distinct.len(), notes.len());
        let mut similar = 0;
        let mut max: f64 = 0.0;
        for pair in 0..2000 {
            let j = jaccard_5grams(&notes[2 * pair], &notes[2 * pair + 1]);
            max = max.max(j);
            if j >= 0.5 {
                similar += 1;
            }
        }
        assert!(
            similar <= 2,
            "{similar} of 2000 random pairs have Jaccard >= 0.5"
        );
        assert!(max < 0.7, "max Jaccard of random pairs {max}");
    }

    #[test]
    fn restyled_notes_normalize_to_the_original() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for _ in 0..500 {
            let original = note(&mut rng, 8, 40, 0.0);
            let copy = restyled(&mut rng, &original);
            assert_ne!(copy, original);
            assert_eq!(normalized(&copy), normalized(&original));
        }
    }

    #[test]
    fn swapped_notes_of_30_words_stay_near_duplicates() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..500 {
            let original = note(&mut rng, 30, 40, 0.0);
            let copy = one_word_swapped(&mut rng, &original);
            assert_ne!(normalized(&copy), normalized(&original));
            let j = jaccard_5grams(&copy, &original);
            assert!(j >= 0.8, "Jaccard {j}:\n{original}\n{copy}");
        }
    }

    #[test]
    fn unhappy_notes_say_so_more_often() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let count_unhappy = |rng: &mut ChaCha8Rng, shift: f64| {
            (0..2000)
                .map(|_| note(rng, 30, 40, shift))
                .filter(|n| UNHAPPY.iter().any(|u| n.contains(u)))
                .count()
        };
        let calm = count_unhappy(&mut rng, -2.0);
        let angry = count_unhappy(&mut rng, 2.0);
        assert!(angry > 2 * calm, "unhappy {angry} vs calm {calm}");
    }
}
