// compromise.js reads JSON lines {"text": "..."} on stdin and writes, for
// each, a JSON line [{"type": "PERSON"|"LOCATION", "start": N, "end": N}]
// with the people and places the compromise NLP library finds, in code
// points. Run by TestCompareCompromise (detect/compare_test.go) with
// NODE_PATH pointing at a node_modules holding compromise.
'use strict';
const nlp = require('compromise');
const readline = require('readline');

// cp converts a UTF-16 offset into a code-point offset of text.
const cp = (text, off) => Array.from(text.slice(0, off)).length;

const rl = readline.createInterface({input: process.stdin, crlfDelay: Infinity});
rl.on('line', line => {
  const {text} = JSON.parse(line);
  const doc = nlp(text);
  const out = [];
  for (const [type, view] of [['PERSON', doc.people()], ['LOCATION', doc.places()]]) {
    for (const m of view.out('offset')) {
      // The match's own text, without the punctuation compromise keeps.
      const o = m.offset;
      let s = o.start, e = o.start + o.length;
      while (e > s && /[\s.,;:!?"'()\]\[{}]/.test(text[e - 1])) e--;
      while (s < e && /[\s"'(\[{]/.test(text[s])) s++;
      if (e > s) out.push({type, start: cp(text, s), end: cp(text, e)});
    }
  }
  process.stdout.write(JSON.stringify(out) + '\n');
});
