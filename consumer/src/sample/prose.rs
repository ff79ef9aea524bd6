//! Prose for the pages: sentences assembled from a word list and templates written for this
//! module.

use super::{sub_seed, Rng};
use std::sync::OnceLock;

/// Paragraphs of sentences for a page: 3–6 paragraphs, 80–300 words, with the `specials`
/// templates each used once; `revision` k replaces k ordinary sentences, one per revision.
pub(super) fn prose(seed: u64, revision: u32, specials: &[&[&str]]) -> Vec<Vec<String>> {
    let mut rng = Rng::new(seed);
    let target = 85 + rng.below(136);
    let n_para = 3 + rng.below(4);
    // (sentence, ordinary?) so that revisions only touch ordinary sentences.
    let mut paras: Vec<Vec<(String, bool)>> = vec![Vec::new(); n_para];
    let mut words = 0;
    for (i, para) in paras.iter_mut().enumerate() {
        let goal = target * (i + 1) / n_para;
        loop {
            let s = sentence_from(&mut rng, TEMPLATES);
            words += s.split_whitespace().count();
            para.push((s, true));
            if words >= goal {
                break;
            }
        }
    }
    for templates in specials {
        let s = sentence_from(&mut rng, templates);
        let p = rng.below(n_para);
        let at = rng.below(paras[p].len() + 1);
        paras[p].insert(at, (s, false));
    }
    for k in 1..=revision {
        let mut r = Rng::new(sub_seed(seed, "revision", u64::from(k)));
        let ordinary: Vec<(usize, usize)> = paras
            .iter()
            .enumerate()
            .flat_map(|(p, ss)| {
                ss.iter()
                    .enumerate()
                    .filter(|(_, s)| s.1)
                    .map(move |(j, _)| (p, j))
            })
            .collect();
        let &(p, j) = r.pick(&ordinary);
        loop {
            let s = sentence_from(&mut r, TEMPLATES);
            if s != paras[p][j].0 {
                paras[p][j].0 = s;
                break;
            }
        }
    }
    paras
        .into_iter()
        .map(|ss| ss.into_iter().map(|(s, _)| s).collect())
        .collect()
}

/// A sentence from one of `templates`, picked at random.
pub(super) fn sentence_from(rng: &mut Rng, templates: &[&str]) -> String {
    let template = *rng.pick(templates);
    sentence(rng, template)
}

/// Fills a template's slots: {N} noun, {Ns} plural, {T} tag-like noun, {V} verb (third person),
/// {Vb} verb (base form), {A} adjective, {D} adverb, {P} place, {X} loanword with accents.
pub(super) fn sentence(rng: &mut Rng, template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = start + rest[start..].find('}').expect("template slots are closed");
        let word = match &rest[start + 1..end] {
            "N" | "T" => rng.word(&NOUNS).to_string(),
            "Ns" => plural(rng.word(&NOUNS)),
            "V" => third_person(rng.word(&VERBS)),
            "Vb" => rng.word(&VERBS).to_string(),
            "A" => rng.word(&ADJECTIVES).to_string(),
            "D" => rng.word(&ADVERBS).to_string(),
            "P" => rng.pick(PLACES).0.to_string(),
            "X" => rng.word(&LOANWORDS).to_string(),
            other => panic!("unknown template slot {other}"),
        };
        out.push_str(&word);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    capitalize(&with_articles(&out))
}

/// "a" becomes "an" before a vowel, so filled templates read naturally.
pub(super) fn with_articles(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let mut out = Vec::with_capacity(words.len());
    for (i, w) in words.iter().enumerate() {
        let next_vowel = words
            .get(i + 1)
            .and_then(|n| n.chars().next())
            .is_some_and(|c| "aeiouAEIOU".contains(c));
        out.push(match *w {
            "a" if next_vowel => "an",
            "A" if next_vowel => "An",
            other => other,
        });
    }
    out.join(" ")
}

pub(super) fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

pub(super) fn ends_in_sibilant(w: &str) -> bool {
    ["s", "x", "z", "ch", "sh"].iter().any(|e| w.ends_with(e))
}

pub(super) fn ends_in_consonant_y(w: &str) -> bool {
    let b = w.as_bytes();
    b.len() >= 2 && b[b.len() - 1] == b'y' && !b"aeiou".contains(&b[b.len() - 2])
}

pub(super) fn plural(noun: &str) -> String {
    if ends_in_sibilant(noun) {
        format!("{noun}es")
    } else if ends_in_consonant_y(noun) {
        format!("{}ies", &noun[..noun.len() - 1])
    } else {
        format!("{noun}s")
    }
}

pub(super) fn third_person(verb: &str) -> String {
    plural(verb)
}

/// A comma-separated word list, split once on first use (a string keeps the lists compact).
pub(super) struct WordList {
    pub(super) text: &'static str,
    pub(super) words: OnceLock<Vec<&'static str>>,
}

impl WordList {
    pub(super) const fn new(text: &'static str) -> WordList {
        WordList {
            text,
            words: OnceLock::new(),
        }
    }

    pub(super) fn words(&self) -> &[&'static str] {
        self.words.get_or_init(|| {
            self.text
                .split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .collect()
        })
    }
}

pub(super) const TEMPLATES: &[&str] = &[
    "The {A} {N} {V} the {N} {D}.",
    "Each {N} {V} a {A} {N} before the {N} {V} it.",
    "When the {N} is {A}, the {N} {D} {V} every {N}.",
    "A {A} {N} rarely {V} the {Ns} of a {A} {N}.",
    "If you {Vb} the {N}, the {N} {V} its {Ns} {D}.",
    "{Ns} and {Ns} {Vb} together in the {A} {N}.",
    "Most {Ns} {Vb} {A} {Ns}, but the {N} {V} only one.",
    "The {N} keeps a {A} {N} for every {N} it {V}.",
    "Before you {Vb} a {N}, ask the {N} whether the {N} is {A}.",
    "Our {Ns} {Vb} the {A} {N} twice a week.",
    "There is no {A} {N} in the {N}, so the {N} {V} the {N} instead.",
    "The {N} of the {N} {V} {D}, and the {Ns} stay {A}.",
    "You can {Vb} the {N} with a {A} {N} and a {N}.",
    "Every {A} {N} should {Vb} the {N} once the {N} is {A}.",
    "In a {A} {N}, the {N} {V} {Ns} that the {N} {V}.",
    "Ask a {N} to {Vb} the {Ns} if the {N} looks {A}.",
    "Without a {N}, no {N} can {Vb} the {A} {Ns}.",
    "The {A} {Ns} on the {N} {Vb} {D} after the {N} {V}.",
    "A {N} that {V} a {N} also {V} the {A} {N}.",
    "Sometimes the {N} {V} the {N}; the {N} then {V} a {A} {N}.",
    "Nobody expects the {N} to {Vb} a {A} {N} on the first day.",
    "The {N} {V} {D} because the {Ns} are {A}.",
];

/// Sentences with markup entities (`&amp;`, `&lt;`, `&gt;`).
pub(super) const WITH_MARKUP: &[&str] = &[
    "Keep the {N} &amp; the {N} in the same &lt;{T}&gt; list.",
    "Write &lt;{T}&gt; &amp; &lt;/{T}&gt; around the {N} so that the {N} {V} it.",
    "The {Ns} &amp; {Ns} chapter {V} how a {N} uses &lt;{T}&gt; and &lt;/{T}&gt;.",
    "Use a &lt;{T}&gt; element when the {N} &amp; the {N} are {A}.",
];

/// Sentences with named and numeric accent entities (`&eacute;`, `&#233;`, ...).
pub(super) const WITH_ACCENT_ENTITIES: &[&str] = &[
    "The caf&eacute; next to the {N} {V} a r&#233;sum&#233; of every {N}.",
    "A r&#233;sum&#233; of the {A} {N} {V} the caf&eacute; {N}.",
    "The {A} fa&ccedil;ade of the {N} hides a caf&#233; and a d&eacute;but {N}.",
    "Our {N} in Z&uuml;rich {V} the {N} from the caf&#233; next door, says the r&eacute;sum&eacute;.",
];

/// Sentences with raw non-ASCII letters.
pub(super) const WITH_ACCENTS: &[&str] = &[
    "The mirror in {P} {V} the {A} {N} {D}.",
    "A {X} near the {N} {V} the {Ns} in {P}.",
    "Readers in {P} {Vb} the {N} with a {A} {X}.",
    "The {N} from {P} {V} our {X} {D}.",
];

/// Latin-1 pages: é and ü in every page.
pub(super) const WITH_E_AND_U: &[&str] = &[
    "The café in Zürich {V} the {A} {N} {D}.",
    "A crème brûlée and a müesli {Vb} the {N} in {P}.",
    "The über-{N} of Düsseldorf {V} every café {N}.",
];

pub(super) const SPECIALS_UTF8: [&[&str]; 3] = [WITH_MARKUP, WITH_ACCENT_ENTITIES, WITH_ACCENTS];
pub(super) const SPECIALS_LATIN1: [&[&str]; 3] = [WITH_E_AND_U, WITH_ACCENTS, WITH_MARKUP];

pub(super) static NOUNS: WordList = WordList::new(
    "library, catalogue, index, archive, record, volume, chapter, section, page, manual, guide,
reference, glossary, appendix, footnote, citation, author, editor, reader, librarian,
collection, edition, revision, draft, release, version, changelog, tutorial, example, table,
figure, diagram, heading, paragraph, sentence, keyword, term, topic, subject, summary,
abstract, journal, article, report, notebook, folder, file, directory, path, link, anchor,
bookmark, network, router, switch, packet, frame, socket, port, address, gateway, firewall,
proxy, mirror, server, client, host, domain, resolver, protocol, header, payload, checksum,
buffer, queue, stream, channel, connection, session, timeout, request, response, handshake,
certificate, key, token, signature, cache, crawler, fetcher, scheduler, worker, thread,
process, daemon, service, endpoint, interface, module, package, component, plugin, parser,
tokenizer, encoder, decoder, compiler, loader, function, method, parameter, argument,
variable, constant, value, field, column, row, schema, query, filter, cursor, transaction,
snapshot, checkpoint, partition, segment, offset, broker, producer, consumer, message,
event, log, metric, counter, gauge, histogram, dashboard, alert, threshold, window, shingle,
fingerprint, sketch, cluster, bucket, hash, digest, bitmap, vector, graph, node, edge, tree,
branch, root, commit, patch, diff, merge, conflict, test, benchmark, profile, trace,
warning, error, exception, bug, fix, feature, option, setting, default, flag, command,
shell, terminal, prompt, script, template, stylesheet, font, layout, menu, button, form,
image, caption, label, badge, banner, footer, sidebar, toolbar, tab, panel, reviewer,
maintainer, translator, contributor, volunteer, workshop, meeting, deadline, schedule,
budget, policy, rule, guideline, convention, standard, proposal, decision, question, answer,
problem, solution, pattern, habit, lesson, course, student, teacher, classroom, campus,
building, room, desk, lamp, garden, street, city, river, bridge, harbour, station, train,
ticket, map, compass, lantern, kettle, teapot, biscuit, sandwich, umbrella, bicycle",
);

pub(super) static VERBS: WordList = WordList::new(
    "store, index, mirror, fetch, parse, cache, compress, encode, decode, publish, archive, link,
resolve, route, forward, retry, refresh, update, replace, remove, rename, copy, compare,
merge, split, sort, filter, count, measure, sample, check, verify, validate, sign, hash,
scan, read, write, print, render, translate, explain, describe, document, summarise, review,
approve, reject, schedule, track, monitor, report, trace, buffer, queue, batch, stream,
send, receive, accept, drop, block, allow, open, close, lock, unlock, load, save, restore,
build, test, deploy, configure, tune, install, upgrade, rebuild, lend, borrow, shelve,
annotate, highlight, search, find, collect, gather, share, keep, hold, skip, ignore, follow,
group, rank, label",
);

pub(super) static ADJECTIVES: WordList = WordList::new(
    "small, large, stale, fresh, quick, slow, careful, simple, complex, quiet, busy, remote,
local, nearby, distant, public, private, shared, hidden, visible, empty, full, partial,
complete, broken, healthy, stable, unstable, recent, ancient, modern, classic, tidy, messy,
clear, vague, precise, rough, exact, similar, different, identical, plain, rich, compact,
verbose, brief, lengthy, narrow, wide, deep, shallow, early, late, weekly, monthly, patient,
eager, gentle, strict, lenient, friendly, reliable, fragile, robust, secure, open, closed,
new, old, spare, primary, secondary, curious, bright, dusty, cosy, wooden, green, golden,
silver, northern, southern",
);

pub(super) static ADVERBS: WordList = WordList::new(
    "quickly, slowly, carefully, quietly, often, usually, always, seldom, gently, eagerly,
patiently, reliably, silently, briefly, eventually, immediately, periodically, gradually,
politely, twice, again, locally, remotely, directly, lazily, safely, neatly, today,
overnight, sometimes",
);

/// (place, ASCII slug): every name is within Latin-1.
pub(super) const PLACES: &[(&str, &str)] = &[
    ("Zürich", "zurich"),
    ("Malmö", "malmo"),
    ("Tromsø", "tromso"),
    ("Kraków", "krakow"),
    ("Bogotá", "bogota"),
    ("Québec", "quebec"),
    ("Reykjavík", "reykjavik"),
    ("São Paulo", "sao-paulo"),
    ("Düsseldorf", "dusseldorf"),
    ("Besançon", "besancon"),
    ("Málaga", "malaga"),
    ("Göteborg", "goteborg"),
    ("Århus", "arhus"),
];

pub(super) static LOANWORDS: WordList = WordList::new(
    "café, façade, résumé, naïveté, jalapeño, smörgåsbord, entrée, fiancé, protégé, doppelgänger,
soufflé, piñata, crème brûlée, déjà vu",
);
