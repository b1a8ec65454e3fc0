#!/usr/bin/env python3
"""Coverage of the MQTT normative statements by the conformance tests.

Reads statements-3.1.1.txt and statements-5.0.txt (one statement a line:
ID | binds | paraphrase [| n/a: reason]) and the GoogleTest sources beside
them. A test names the statements it checks in its name, MQTT-3.1.2-4 as
MQTT_3_1_2_4, e.g. TEST_F(PahoV5, MQTT_3_3_1_5_RetainedMessageStored).
The suite name says the version: one containing V311 counts for 3.1.1,
one containing V5 for 5.0, any other for every version that has the id.

Prints, per version, every statement as bug (named by a test skipped with
GTEST_SKIP() << "bug: ..." until the broker is fixed, whatever other tests
pass), tested (by which tests), n/a (with the reason) or untested, then
the totals. Exits 1 if a test names an id
that the list of its version does not have, or if a list is malformed;
untested statements are reported, not failed.

python3 standard library only.
"""

import argparse
import collections
import os
import re
import sys

VERSIONS = [("3.1.1", "statements-3.1.1.txt"), ("5.0", "statements-5.0.txt")]
BINDS = {"server", "client", "both"}
ID_PATTERN = re.compile(r"^MQTT-\d+\.\d+\.\d+-\d+$")
TEST_PATTERN = re.compile(r"\bTEST(?:_F|_P)?\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)")
NAMED_ID = re.compile(r"MQTT_(\d+)_(\d+)_(\d+)_(\d+)(?=_|$)")
BUG_SKIP = re.compile(r'GTEST_SKIP\(\)\s*<<\s*"bug:')

Statement = collections.namedtuple("Statement", "id binds text na_reason line")


def read_statements(path, errors):
    statements = collections.OrderedDict()
    with open(path, encoding="utf-8") as handle:
        for number, raw in enumerate(handle, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            fields = [field.strip() for field in line.split("|")]
            where = "%s:%d" % (os.path.basename(path), number)
            if len(fields) not in (3, 4) or not ID_PATTERN.match(fields[0]) or fields[1] not in BINDS:
                errors.append("%s: expected 'ID | server|client|both | text [| n/a: reason]'" % where)
                continue
            na_reason = None
            if len(fields) == 4:
                if not fields[3].startswith("n/a:"):
                    errors.append("%s: the fourth field must start with 'n/a:'" % where)
                    continue
                na_reason = fields[3][len("n/a:"):].strip()
            if fields[0] in statements:
                errors.append("%s: %s listed twice" % (where, fields[0]))
                continue
            statements[fields[0]] = Statement(fields[0], fields[1], fields[2], na_reason, number)
    return statements


def versions_of_suite(suite):
    if "V311" in suite:
        return ["3.1.1"]
    if "V5" in suite:
        return ["5.0"]
    return None  # any version that has the id


def find_tests(source_dir):
    """Yields (file, suite, name, [statement ids], skipped for a bug) for every test."""
    for name in sorted(os.listdir(source_dir)):
        if not name.endswith(".cc"):
            continue
        path = os.path.join(source_dir, name)
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        matches = list(TEST_PATTERN.finditer(text))
        for index, match in enumerate(matches):
            suite, test = match.group(1), match.group(2)
            ids = ["MQTT-%s.%s.%s-%s" % found for found in NAMED_ID.findall(test)]
            end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
            skipped = BUG_SKIP.search(text, match.end(), end) is not None
            yield name, suite, test, ids, skipped


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--dir", default=here, help="directory with the lists and the test sources")
    parser.add_argument("--untested-only", action="store_true", help="list only untested and bug statements")
    args = parser.parse_args()

    errors = []
    lists = collections.OrderedDict()
    for version, filename in VERSIONS:
        lists[version] = read_statements(os.path.join(args.dir, filename), errors)

    tested = {version: collections.defaultdict(list) for version in lists}
    bugs = {version: collections.defaultdict(list) for version in lists}
    test_count = 0
    skipped_count = 0
    for filename, suite, test, ids, skipped in find_tests(args.dir):
        test_count += 1
        skipped_count += skipped
        label = "%s.%s" % (suite, test)
        versions = versions_of_suite(suite)
        for statement_id in ids:
            targets = versions or [v for v in lists if statement_id in lists[v]]
            if not targets or any(statement_id not in lists[v] for v in targets):
                wanted = ", ".join(versions) if versions else "any version"
                errors.append("%s: %s names %s, which is not a statement of MQTT %s"
                              % (filename, label, statement_id, wanted))
                continue
            for version in targets:
                (bugs if skipped else tested)[version][statement_id].append(label)

    totals = []
    for version, statements in lists.items():
        counts = collections.Counter()
        lines = []
        for statement in statements.values():
            tests = tested[version].get(statement.id)
            if bugs[version].get(statement.id):  # a known violation outweighs passing tests
                status = "bug"
                detail = "skipped until fixed: " + ", ".join(bugs[version][statement.id])
                if tests:
                    detail += "; passing: " + ", ".join(tests)
            elif tests:
                status, detail = "tested", ", ".join(tests)
            elif statement.na_reason is not None:
                status, detail = "n/a", statement.na_reason
            else:
                status, detail = "untested", "%s (%s)" % (statement.text, statement.binds)
            counts[status] += 1
            if not args.untested_only or status in ("untested", "bug"):
                lines.append("  %-16s %-9s %s" % (statement.id, status, detail))
        print("MQTT %s: %d statements" % (version, len(statements)))
        print("\n".join(lines))
        summary = "MQTT %s: tested %d, bug %d, n/a %d, untested %d (of %d)" % (
            version, counts["tested"], counts["bug"], counts["n/a"], counts["untested"], len(statements))
        totals.append(summary)
        print(summary)
        print()
    print("Totals (%d tests scanned, %d skipped for broker bugs):" % (test_count, skipped_count))
    for summary in totals:
        print("  " + summary)
    if errors:
        print()
        for error in errors:
            print("error: " + error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
