"""`python -m pipeline import-ratings`: a ratings log into the raw contract (pipeline/datagen/ratings_import.py).

Hand-made logs of a few dozen rows in tmp files for the rules (label threshold, strictly earlier
and ordered histories, the UTC day cut, category, the fixed genre projection, the items snapshots,
the own-CSV format, markers, the CLI's exits), and a few real days of the vendored MovieTweetings
data set through the real validate.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.__main__ import main as pipeline_main
from pipeline.config import load_config
from pipeline.contracts import features as F
from pipeline.contracts import inputs, raw, rows
from pipeline.datagen import ratings_formats as rf
from pipeline.datagen import ratings_import as ri
from pipeline.datagen import ratings_read as rr
from pipeline.datagen import ratings_rows as rw
from pipeline.paths import RunPaths, events_partition, items_partition

DAY1, DAY2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
MIDNIGHT = int(dt.datetime(2024, 1, 2, tzinfo=dt.UTC).timestamp())      # DAY1 | DAY2
MOVIES = {10: ("Alpha (2001)", "Drama|Comedy"), 20: ("Beta :: the sequel (2002)", "Comedy"),
          30: ("Gamma (2003)", ""), 40: ("Delta (2004)", "Action|Drama"), 50: ("Never rated (2005)", "Horror")}
# (user, item, rating, unix seconds)
RATINGS = [
    (1, 10, 9, MIDNIGHT - 7200),       # DAY1 22:00
    (1, 20, 8, MIDNIGHT - 1),          # DAY1 23:59:59
    (1, 30, 10, MIDNIGHT),             # DAY2 00:00:00
    (1, 40, 3, MIDNIGHT),              # DAY2 00:00:00, the same second: not in each other's history
    (1, 10, 7, MIDNIGHT + 3600),       # DAY2 01:00, a re-rating of item 10
    (2, 20, 10, MIDNIGHT - 3600),      # DAY1 23:00
    (2, 40, 9, MIDNIGHT + 5400),       # DAY2 01:30
    (3, 30, 0, MIDNIGHT + 80_000),     # DAY2 22:13:20
]


def _movietweetings(tmp_path, ratings=RATINGS, movies=MOVIES):
    ratings_file, movies_file = tmp_path / "ratings.dat", tmp_path / "movies.dat"
    ratings_file.write_text("".join(f"{u}::{i:07d}::{r}::{t}\n" for u, i, r, t in ratings))
    movies_file.write_text("".join(f"{i:07d}::{title}::{genres}\n" for i, (title, genres) in movies.items()),
                           encoding="utf-8")
    return ratings_file, movies_file


def _csv(tmp_path, ratings=RATINGS, platform=True):
    ratings_file, items_file = tmp_path / "log.csv", tmp_path / "items.csv"
    header = "user_id,item_id,rating,timestamp" + (",platform" if platform else "")
    iso = [dt.datetime.fromtimestamp(t, dt.timezone(dt.timedelta(hours=1))).isoformat() for *_, t in ratings]
    lines = [f"{u},{i},{r / 2},{when}" + (",ios" if platform and k % 2 else "," if platform else "")
             for k, ((u, i, r, _), when) in enumerate(zip(ratings, iso))]
    ratings_file.write_text("\n".join([header, *lines]) + "\n")
    items_file.write_text("item_id,title,genres,price\n" + "".join(
        f'{i},"{title}",{genres},{i / 10}\n' for i, (title, genres) in MOVIES.items()))
    return ratings_file, items_file


def _import(tmp_path, positive_min=9.0, **kwargs):
    tmp_path.mkdir(parents=True, exist_ok=True)
    ratings, items = rf.read_movietweetings(*_movietweetings(tmp_path))
    report = ri.import_ratings(tmp_path / "raw", ratings, items, positive_min, **kwargs)
    return tmp_path / "raw", report


def _events(root, day):
    return pq.read_table(events_partition(root, day) / ri.EVENTS_FILE).to_pylist()


def _items(root, day):
    return pq.read_table(items_partition(root, day) / ri.ITEMS_FILE)


def _by_key(root):
    return {(e[F.USER_ID], e[F.ITEM_ID], e[F.EVENT_TS].timestamp()): e for day in (DAY1, DAY2)
            for e in _events(root, day)}


def test_label_is_rating_at_or_above_the_threshold(tmp_path):
    root, report = _import(tmp_path)
    labels = {(u, i, t): e[F.LABEL] for (u, i, t), e in _by_key(root).items()}
    assert labels == {(u, i, float(t)): int(r >= 9) for u, i, r, t in RATINGS}
    assert report.events == len(RATINGS) and report.positive_rate == round(4 / len(RATINGS), 4)
    root, report = _import(tmp_path / "ten", positive_min=10)
    assert sum(e[F.LABEL] for e in _by_key(root).values()) == 2


def test_history_holds_strictly_earlier_items_most_recent_last(tmp_path):
    root, _ = _import(tmp_path)
    history = {(u, i, t): e[F.HISTORY] for (u, i, t), e in _by_key(root).items()}
    assert history[(1, 10, MIDNIGHT - 7200.0)] == []
    assert history[(1, 20, MIDNIGHT - 1.0)] == [10]
    assert history[(1, 30, float(MIDNIGHT))] == history[(1, 40, float(MIDNIGHT))] == [10, 20]   # a tie is not earlier
    assert history[(1, 10, MIDNIGHT + 3600.0)] == [10, 20, 30, 40]     # across the day cut, ties by item id
    assert history[(2, 40, MIDNIGHT + 5400.0)] == [20]
    assert history[(3, 30, MIDNIGHT + 80_000.0)] == []


def test_history_keeps_the_most_recent_fifty_and_counts_days_before_start(tmp_path):
    many = [(7, 100 + k, 5, MIDNIGHT - 86_400 * 3 + k) for k in range(60)] + [(7, 10, 9, MIDNIGHT + 10)]
    movies = {**MOVIES, **{100 + k: (f"Film {k}", "Drama") for k in range(60)}}
    ratings, items = rf.read_movietweetings(*_movietweetings(tmp_path, many, movies))
    ri.import_ratings(tmp_path / "raw", ratings, items, 9.0, start=DAY2, end=DAY2)
    (event,) = _events(tmp_path / "raw", DAY2)
    assert event[F.HISTORY] == [100 + k for k in range(10, 60)]
    assert not events_partition(tmp_path / "raw", DAY1).exists()
    assert sorted(p.name for p in (tmp_path / "raw" / "items").iterdir()) == [f"ds={DAY2}"]


def test_days_are_utc_calendar_days_and_hour_is_the_utc_hour(tmp_path):
    root, report = _import(tmp_path)
    day1, day2 = _events(root, DAY1), _events(root, DAY2)
    assert [(e[F.USER_ID], e[F.ITEM_ID], e[F.HOUR]) for e in day1] == [(1, 10, 22), (2, 20, 23), (1, 20, 23)]
    assert [e[F.EVENT_TS].isoformat() for e in day1][-1] == "2024-01-01T23:59:59+00:00"
    assert [(e[F.USER_ID], e[F.ITEM_ID], e[F.HOUR]) for e in day2][:2] == [(1, 30, 0), (1, 40, 0)]
    assert all(e[F.EVENT_TS].date() == DAY2 and e[F.PLATFORM] is None for e in day2)
    assert [d["events"] for d in report.days] == [3, 5] and (report.start, report.end) == (str(DAY1), str(DAY2))
    ids = [e[F.EVENT_ID] for e in day1 + day2]
    assert ids[0] == f"20240101-1-10-{MIDNIGHT - 7200}" and len(set(ids)) == len(ids)
    again, _ = _import(tmp_path / "again")
    assert [e[F.EVENT_ID] for e in _events(again, DAY1) + _events(again, DAY2)] == ids


def test_the_output_passes_the_contract_and_the_row_rules(tmp_path):
    root, _ = _import(tmp_path)
    for day in (DAY1, DAY2):
        events = pq.read_table(events_partition(root, day))
        items = _items(root, day)
        assert raw.schema_problems("events", "e", events.schema) == []
        assert raw.schema_problems("items", "i", items.schema) == []
        assert tuple(events.schema.names) == F.EVENT_COLUMNS and tuple(items.schema.names) == F.ITEM_COLUMNS
        catalog = rows.Catalog.of(rows.check_items(raw.normalize(items, "items")))
        checked = rows.check_events(raw.normalize(events, "events"), catalog, day, np.zeros(events.num_rows, bool))
        assert set(checked.reasons) == {""}


def test_items_snapshot_holds_every_item_rated_so_far_and_the_undated_ones(tmp_path):
    root, report = _import(tmp_path)
    day1, day2 = _items(root, DAY1), _items(root, DAY2)
    assert sorted(day1.column(F.ITEM_ID).to_pylist()) == [10, 20, 50]     # 50: never rated, no date
    assert sorted(day2.column(F.ITEM_ID).to_pylist()) == [10, 20, 30, 40, 50]
    assert report.catalog_items == 5 and [d["items"] for d in report.days] == [3, 5]
    row = {r[F.ITEM_ID]: r for r in day2.to_pylist()}
    assert row[10][F.CATEGORY] == "Drama" and row[40][F.CATEGORY] == "Action" and row[30][F.CATEGORY] == rw.NO_GENRE
    assert row[20][F.TITLE] == "Beta :: the sequel (2002)" and row[10][F.PRICE] is None
    assert all(len(r[F.IMAGE]) == F.IMAGE_DIM for r in row.values())
    assert np.array_equal(np.array(row[40][F.IMAGE], np.float32), rw.genre_image("Action|Drama"))


def test_genre_projection_is_fixed(tmp_path):
    drama = rw.genre_vector("Drama")
    assert np.count_nonzero(drama) == rw.IMAGE_NONZEROS and set(np.unique(drama)) == {-1.0, 0.0, 1.0}
    assert np.array_equal(rw.genre_image("Drama|Crime"), rw.genre_image(" Crime |Drama|Drama"))
    assert np.array_equal(rw.genre_image(""), rw.genre_vector(rw.NO_GENRE))
    assert abs(float(drama @ rw.genre_vector("Comedy"))) < 0.3 * rw.IMAGE_NONZEROS
    # Pinned: the same bytes in every process, machine and numpy version (no RNG involved).
    digest = hashlib.sha256(rw.genre_image("Crime|Drama").tobytes()).hexdigest()
    assert digest == "14b7c3ce8f073f4ffd157b722bc4114262e784e3a7e2ee3ebc655f0a097ad9ab"


def test_own_csv_log_with_iso_times_platform_and_price(tmp_path):
    ratings, items = rf.read_own_log(*_csv(tmp_path))
    assert np.array_equal(ratings.ts_us, np.array([t for *_, t in RATINGS]) * 1_000_000)    # +01:00 read as UTC
    ri.import_ratings(tmp_path / "raw", ratings, items, 4.5)
    root = tmp_path / "raw"
    from_csv = _by_key(root)
    reference, _ = _import(tmp_path / "dat")
    for key, event in _by_key(reference).items():
        assert from_csv[key][F.LABEL] == event[F.LABEL] and from_csv[key][F.HISTORY] == event[F.HISTORY]
    assert {e[F.PLATFORM] for e in from_csv.values()} == {"ios", None}
    assert _items(root, DAY2).to_pydict()[F.PRICE] == [5.0, 1.0, 2.0, 3.0, 4.0]   # never rated first, then by first day


def test_ratings_of_items_the_items_file_lacks_are_dropped_and_counted(tmp_path):
    ratings, items = rf.read_movietweetings(*_movietweetings(tmp_path, [*RATINGS, (4, 99, 9, MIDNIGHT + 60)]))
    report = ri.import_ratings(tmp_path / "raw", ratings, items, 9.0)
    assert (report.ratings_read, report.ratings_unknown_item, report.events) == (len(RATINGS) + 1, 1, len(RATINGS))


def test_a_repeated_row_is_dropped_once_counted_and_not_in_later_histories(tmp_path):
    repeated = [RATINGS[0], (1, 10, 3, RATINGS[0][3]), *RATINGS[1:]]     # same user, item, second
    ratings, items = rf.read_movietweetings(*_movietweetings(tmp_path, repeated))
    report = ri.import_ratings(tmp_path / "raw", ratings, items, 9.0)
    assert (report.ratings_read, report.ratings_repeated, report.events) == (len(RATINGS) + 1, 1, len(RATINGS))
    events = _by_key(tmp_path / "raw")
    assert events[(1, 10, float(RATINGS[0][3]))][F.LABEL] == 1            # the first row's rating (9) is kept
    assert events[(1, 20, float(RATINGS[1][3]))][F.HISTORY] == [10]       # not [10, 10]
    ids = [e[F.EVENT_ID] for e in events.values()]
    assert len(ids) == len(set(ids))


def test_a_log_of_years_is_written_only_for_the_days_named(tmp_path):
    """MovieLens' logs span decades: a snapshot a day would write gigabytes nobody asked for."""
    years = [(1, 10, 9, MIDNIGHT - 500 * 86_400), *RATINGS]
    ratings, items = rf.read_movietweetings(*_movietweetings(tmp_path, years))
    spans = r"501 days to write \(2022-08-20 to 2024-01-02; the log spans 2022-08-20 to 2024-01-02\)"
    with pytest.raises(rr.RatingsImportError, match=spans + ".*--start and --end"):
        ri.import_ratings(tmp_path / "raw", ratings, items, 9.0)
    with pytest.raises(rr.RatingsImportError, match=r"502 days to write \(2022-08-19 to 2024-01-02;"):
        ri.import_ratings(tmp_path / "raw", ratings, items, 9.0, start=DAY1 - dt.timedelta(days=500))
    assert not (tmp_path / "raw").exists()
    report = ri.import_ratings(tmp_path / "raw", ratings, items, 9.0, start=DAY1, end=DAY2)
    assert report.events == len(RATINGS) and len(report.days) == 2


def test_a_day_without_ratings_has_a_snapshot_but_no_events_partition(tmp_path):
    later = [(1, 10, 9, MIDNIGHT - 60), (2, 30, 9, MIDNIGHT + 86_400 + 60)]
    ratings, items = rf.read_movietweetings(*_movietweetings(tmp_path, later))
    report = ri.import_ratings(tmp_path / "raw", ratings, items, 9.0)
    assert report.days_without_ratings == [str(DAY2)] and [d["events"] for d in report.days] == [1, 0, 1]
    assert not events_partition(tmp_path / "raw", DAY2).exists()
    assert (items_partition(tmp_path / "raw", DAY2) / inputs.SUCCESS_MARKER).exists()


def test_every_partition_is_marked_and_a_reimport_replaces_stale_files(tmp_path):
    root, _ = _import(tmp_path)
    for table in ("events", "items"):
        for day in (DAY1, DAY2):
            assert (root / table / f"ds={day}" / inputs.SUCCESS_MARKER).exists()
    stale = events_partition(root, DAY1) / "part-00007.parquet"
    stale.write_bytes(b"old")
    ratings, items = rf.read_movietweetings(*_movietweetings(tmp_path))
    ri.import_ratings(root, ratings, items, 9.0, start=DAY1, end=DAY1)
    assert not stale.exists() and (events_partition(root, DAY1) / inputs.SUCCESS_MARKER).exists()


@pytest.mark.parametrize(("content", "message"), [
    ("1::10::9\n", "ratings.dat:1: expected 4 fields separated by '::'"),
    ("1::10::9::100\n ::10::9::100\n", "ratings.dat:2: user_id is empty"),
    ("1::10::9::100\n1::::9::100\n", "ratings.dat:2: item_id is empty"),
    ("1::10::nine::100\n", "ratings.dat:1: rating 'nine' is not a number"),
])
def test_bad_rows_name_file_and_line(tmp_path, content, message):
    ratings_file, movies_file = _movietweetings(tmp_path)
    ratings_file.write_text(content)
    with pytest.raises(rr.RatingsImportError, match=message):
        rf.read_movietweetings(ratings_file, movies_file)


def test_naive_csv_times_and_missing_columns_are_refused(tmp_path):
    ratings_file, items_file = _csv(tmp_path, platform=False)
    ratings_file.write_text("user_id,item_id,rating,timestamp\n1,10,9,2024-01-01T12:00:00\n")
    with pytest.raises(rr.RatingsImportError, match="zone offset"):
        rf.read_own_log(ratings_file, items_file)
    ratings_file.write_text("user_id,item_id,rating,timestamp\n1,10,9,1704067200000000\n")    # microseconds
    with pytest.raises(rr.RatingsImportError, match=r"log.csv: data row 1: timestamp '1704067200000000' is not betw"):
        rf.read_own_log(ratings_file, items_file)
    ratings_file.write_text("user_id,item_id,rating,timestamp\n1,10,9,1704067200000\n1,20,9,100\n")  # ms and s
    with pytest.raises(rr.RatingsImportError, match=r"log.csv: data row 1: timestamp '1704067200000' is not betw"):
        rf.read_own_log(ratings_file, items_file)
    ratings_file.write_text("user,item,rating,timestamp\n1,10,9,100\n")
    with pytest.raises(rr.RatingsImportError, match=r"missing column\(s\) user_id, item_id"):
        rf.read_own_log(ratings_file, items_file)


def test_a_byte_order_mark_is_not_part_of_the_first_value(tmp_path):
    """Excel saves "CSV UTF-8" with a BOM: the header (or a .dat file's first user id) stays clean."""
    ratings_file, items_file = _csv(tmp_path, platform=False)
    for path in (ratings_file, items_file):
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    ratings, items = rf.read_own_log(ratings_file, items_file)
    assert ratings.user_text is None and ratings.user.tolist() == [u for u, *_ in RATINGS]
    assert items.item_id.tolist() == list(MOVIES)
    dat_ratings, dat_movies = _movietweetings(tmp_path)
    dat_ratings.write_bytes(b"\xef\xbb\xbf" + dat_ratings.read_bytes())
    ratings, _ = rf.read_movietweetings(dat_ratings, dat_movies)
    assert ratings.user_text is None and ratings.user[0] == RATINGS[0][0]


def test_a_tab_or_semicolon_separated_log_reads_like_the_csv(tmp_path):
    ratings_file, items_file = _csv(tmp_path)
    expected, _ = rf.read_own_log(ratings_file, items_file)
    for name, delimiter in (("tab", "\t"), (";", ";")):
        tsv = tmp_path / f"log-{len(delimiter)}-{ord(delimiter)}.txt"
        tsv.write_text(ratings_file.read_text().replace(",", delimiter))
        items_tsv = tmp_path / f"items-{ord(delimiter)}.txt"
        items_tsv.write_text(items_file.read_text().replace(",", delimiter))
        ratings, items = rf.read_own_log(tsv, items_tsv, rf.LogDialect(delimiter=name))
        assert ratings.ts_us.tolist() == expected.ts_us.tolist() and len(items.item_id) == len(MOVIES)


def test_a_ratings_only_log_without_header_imports_with_items_titled_by_their_ids(tmp_path):
    """Amazon's ratings-only files: `user,item,rating,time` lines, no header, no metadata."""
    log_file = tmp_path / "ratings_Electronics.csv"
    log_file.write_text("".join(f"A{u:03d}X,B00{i:07d},{r / 2},{t}\n" for u, i, r, t in RATINGS))
    out = subprocess.run([sys.executable, "-m", "pipeline", "import-ratings", "--format", "csv", "--ratings",
                          str(log_file), "--no-header", "--positive-min", "4.5", "--out", str(tmp_path / "raw")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "no items file" in out.stderr and '"events": 8' in out.stdout
    catalog = _items(tmp_path / "raw", DAY2).to_pylist()
    rated = {f"B00{i:07d}" for _, i, _, _ in RATINGS}
    assert {r[F.TITLE] for r in catalog} == rated and {r[F.CATEGORY] for r in catalog} == {rw.NO_GENRE}
    assert {r[F.ITEM_ID] for r in catalog} == {rr.contract_id(t) for t in rated}
    with pytest.raises(rr.RatingsImportError, match=r"a file without a header needs user_id \(column 1\), item_"):
        (tmp_path / "short.csv").write_text("1,10\n")
        rf.read_own_log(tmp_path / "short.csv", None, rf.LogDialect(header=False))
    with pytest.raises(rr.RatingsImportError, match="names its columns by number .* not 'u'"):
        rf.read_own_log(log_file, None, rf.LogDialect({"user_id": "u"}, header=False))


def test_a_headerless_log_in_another_order_names_its_columns_by_number(tmp_path):
    """Amazon's 2018 ratings-only files put the item first: `item,user,rating,time`; the items
    file, headerless too, keeps its own order (a number maps only the file that has that field)."""
    swapped, items_file = tmp_path / "ratings_Books.csv", tmp_path / "items.csv"
    swapped.write_text("".join(f"{i},{u},{r},{t}\n" for u, i, r, t in RATINGS))
    items_file.write_text("".join(f"{i},{title},{genres}\n" for i, (title, genres) in MOVIES.items()))
    dialect = rf.LogDialect({"item_id": "1", "user_id": "2"}, header=False)
    ratings, items = rf.read_own_log(swapped, items_file, dialect)
    expected, _ = rf.read_movietweetings(*_movietweetings(tmp_path))
    assert ratings.user.tolist() == expected.user.tolist() and ratings.item.tolist() == expected.item.tolist()
    assert items.item_id.tolist() == list(MOVIES) and items.title.to_pylist()[0] == MOVIES[10][0]
    with pytest.raises(rr.RatingsImportError, match=r"needs user_id \(column 2\), item_id \(column 1\), rating \(c"):
        rf.read_own_log(swapped, None, rf.LogDialect({"item_id": "1", "user_id": "2", "rating": "7"}, header=False))


def test_times_without_an_offset_are_read_in_the_named_zone(tmp_path):
    """Yelp writes `2016-03-09 00:00:00` with no zone: refused, unless --time-zone names it; a
    wall-clock time the zone skips (spring forward) is the instant after the gap."""
    ratings_file, items_file = _csv(tmp_path, platform=False)
    ratings_file.write_text("user_id,item_id,rating,timestamp\n1,10,9,2024-01-01 23:30:00\n"
                            "2,20,9,2024-03-31T02:30:00\n")
    with pytest.raises(rr.RatingsImportError, match="name the log's zone with --time-zone"):
        rf.read_own_log(ratings_file, items_file)
    ratings, _ = rf.read_own_log(ratings_file, items_file, rf.LogDialect(time_zone="Europe/Berlin"))
    utc = [dt.datetime.fromtimestamp(us / 1e6, dt.UTC) for us in ratings.ts_us.tolist()]
    assert utc == [dt.datetime(2024, 1, 1, 22, 30, tzinfo=dt.UTC), dt.datetime(2024, 3, 31, 1, 0, tzinfo=dt.UTC)]
    ratings_file.write_text("user_id,item_id,rating,timestamp\n1,10,9,2024-01-01 23:30:00\n"
                            "2,20,9,2024-01-02T00:30:00+01:00\n")
    with pytest.raises(rr.RatingsImportError, match="all with a zone offset, or all without one, read in Europe/Ber"):
        rf.read_own_log(ratings_file, items_file, rf.LogDialect(time_zone="Europe/Berlin"))
    with pytest.raises(rr.RatingsImportError, match="unknown time zone 'Mars/Olympus'"):
        rf.LogDialect(time_zone="Mars/Olympus")


def _amazon_jsonl(tmp_path):
    """Amazon Reviews '23's two files, shaped as they come: text ids, float ratings, ms times,
    fields nobody maps (review text, nested images, a details object), category lists."""
    reviews, meta = tmp_path / "Books.jsonl", tmp_path / "meta_Books.jsonl"
    reviews.write_text("".join(json.dumps({
        "rating": r / 2, "title": "ok", "text": "long review", "images": [{"url": "x"}],
        "asin": f"X{i}", "parent_asin": f"B00{i:07d}", "user_id": f"AE{u:05d}Q", "timestamp": t * 1000,
        "helpful_vote": 0, "verified_purchase": True}) + "\n" for u, i, r, t in RATINGS))
    meta.write_text("".join(json.dumps({
        "main_category": "Books", "title": title, "categories": [g for g in genres.split("|") if g],
        "price": i / 10 if i % 20 else None, "details": {"Publisher": "P"}, "parent_asin": f"B00{i:07d}"}) + "\n"
        for i, (title, genres) in MOVIES.items()))
    return reviews, meta


def test_a_json_lines_log_reads_like_the_csv(tmp_path):
    reviews, meta = _amazon_jsonl(tmp_path)
    dialect = rf.LogDialect({"item_id": "parent_asin", "genres": "categories"})
    ratings, items = rf.read_own_log(reviews, meta, dialect, fmt="jsonl")
    expected, expected_items = rf.read_movietweetings(*_movietweetings(tmp_path))
    assert ratings.ts_us.tolist() == expected.ts_us.tolist() and ratings.rating.tolist() == [
        r / 2 for *_, r, _ in RATINGS]
    assert ratings.item_text.to_pylist() == [f"B00{i:07d}" for _, i, _, _ in RATINGS]
    assert items.genres.to_pylist() == expected_items.genres.to_pylist()
    assert items.price.to_pylist() == [None if i % 20 == 0 else i / 10 for i in MOVIES]
    out = subprocess.run([sys.executable, "-m", "pipeline", "import-ratings", "--format", "jsonl", "--ratings",
                          str(reviews), "--items", str(meta), "--column", "item_id=parent_asin", "--column",
                          "genres=categories", "--positive-min", "4", "--out", str(tmp_path / "raw")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"events": 8' in out.stdout and "read as unix milliseconds" in out.stderr
    assert {r[F.CATEGORY] for r in _items(tmp_path / "raw", DAY2).to_pylist()} >= {"Drama", "Comedy", "Action"}


@pytest.mark.parametrize("line, message", [
    ('{"user_id": 1, "item_id": 10, "rating": 4', r"Books.jsonl:2: not a JSON object"),
    ('[1, 10, 4, 100]', r"Books.jsonl:2: not a JSON object: '\[1, 10"),
    ('{"user_id": 1, "item_id": 10, "rating": 4}', r"Books.jsonl:2: no field 'timestamp'"),
    ('{"user_id": {"id": 1}, "item_id": 10, "rating": 4, "timestamp": 100}', r"Books.jsonl:2: field 'user_id' holds"),
    ('{"user_id": 1, "item_id": 10, "rating": "good", "timestamp": 100}', r"Books.jsonl:2: rating 'good' is not a n"),
])
def test_bad_json_lines_name_file_and_line(tmp_path, line, message):
    reviews = tmp_path / "Books.jsonl"
    reviews.write_text('{"user_id": 1, "item_id": 10, "rating": 4, "timestamp": 100}\n' + line + "\n")
    with pytest.raises(rr.RatingsImportError, match=message):
        rf.read_own_log(reviews, None, fmt="jsonl")


def test_integer_timestamps_past_1e11_are_milliseconds(tmp_path):
    ratings_file, items_file = _csv(tmp_path, platform=False)
    ratings_file.write_text("user_id,item_id,rating,timestamp\n1,10,9,1704067200123\n2,20,9,1704153600000\n")
    ratings, _ = rf.read_own_log(ratings_file, items_file)
    assert ratings.ts_us.tolist() == [1704067200123000, 1704153600000000]


def test_cli_imports_a_csv_log(tmp_path):
    ratings_file, items_file = _csv(tmp_path)
    out = subprocess.run([sys.executable, "-m", "pipeline", "import-ratings", "--format", "csv", "--ratings",
                          str(ratings_file), "--items", str(items_file), "--positive-min", "4.5", "--out",
                          str(tmp_path / "raw"), "--start", str(DAY2)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"events": 5' in out.stdout and (events_partition(tmp_path / "raw", DAY2) / inputs.SUCCESS_MARKER).exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--format", "ml-25m"], "unknown format 'ml-25m'"),
    (["--ratings", "{tmp}/nope.dat"], "nope.dat: cannot read"),
    (["--format", "csv", "--ratings", "{tmp}/log.csv", "--items", "{tmp}/items.csv"], "needs --positive-min"),
    (["--start", "2013-13-01"], "argument --start"),
    (["--start", "2014-01-01"], "no ratings from 2014-01-01 to 2014-01-01: the log spans 2013-02-28 to 2013-09-01"),
    (["--start", "2013-03-02", "--end", "2013-03-01"], "--start 2013-03-02 is after --end 2013-03-01"),
    (["--column", "userid"], "argument --column: 'userid' is not CONTRACT=YOURS"),
    (["--column", "user=userId"], "argument --column: 'user=userId' is not CONTRACT=YOURS"),
    (["--encoding", "klingon"], "unknown text encoding 'klingon'"),
    (["--column", "user_id=userId"], "--column, --delimiter and --no-header describe CSV files"),
    (["--format", "csv", "--ratings", "{tmp}/log.csv", "--items", "{tmp}/items.csv", "--positive-min", "4",
      "--delimiter", ";;"], "the delimiter must be one character"),
    (["--format", "csv", "--ratings", "{tmp}/ratings.csv", "--items", "{tmp}/products.csv", "--positive-min", "4",
      "--encoding", "latin-1"], "ratings.csv: missing column(s) user_id, item_id, rating, timestamp"),
])
def test_cli_refusals_are_one_line_and_exit_2(tmp_path, capsys, args, message):
    _csv(tmp_path)
    _text_id_log(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        pipeline_main(["import-ratings", "--out", str(tmp_path / "raw"), *[a.format(tmp=tmp_path) for a in args]])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "raw").exists()


def test_vendored_data_set_figures():
    """What docs/data.md says of the data set and the default threshold."""
    ratings, items = rf.read_movietweetings(rf.MOVIETWEETINGS_DIR / "ratings.dat", rf.MOVIETWEETINGS_DIR / "movies.dat")
    days, counts = np.unique(ratings.ts_us // 86_400_000_000, return_counts=True)
    assert (len(ratings.user), len(items.item_id), len(days), days[-1] - days[0] + 1) == (100_000, 10_506, 186, 186)
    assert np.median(counts) == 494.5 and round(float((ratings.rating >= 9).mean()), 3) == 0.264
    small = {str(dt.date(1970, 1, 1) + dt.timedelta(days=int(d))): int(c) for d, c in zip(days, counts) if c < 200}
    assert small == {"2013-06-12": 46}
    assert (rf.MOVIETWEETINGS_DIR / "LICENSE").read_text().startswith("The MIT License")


def test_real_days_pass_validate(tmp_path):
    """Four consecutive real days (a 3-day window and its eval day) through the real validate."""
    from components.validate import run

    report = ri.import_ratings(tmp_path / "raw", *rf.read_movietweetings(rf.MOVIETWEETINGS_DIR / "ratings.dat",
                                                                         rf.MOVIETWEETINGS_DIR / "movies.dat"),
                               ri.MOVIETWEETINGS_POSITIVE_MIN, dt.date(2013, 8, 29), dt.date(2013, 9, 1))
    assert [d["events"] for d in report.days] == [654, 759, 1080, 799]
    config = load_config(overrides={"data.raw_root": str(tmp_path / "raw"), "data.artifact_root": str(tmp_path / "art"),
                                     "window.train_days": 3}, env={})
    result = run(config, RunPaths.for_run(config, dt.date(2013, 9, 1), "import"))
    assert result.rows == {"2013-08-29": 654, "2013-08-30": 759, "2013-08-31": 1080, "2013-09-01": 799}
    assert all(0.2 < rate < 0.3 for rate in result.label_rate.values())


def _text_id_log(tmp_path, encoding="utf-8"):
    """The hand-made log as a real shop's export: ASIN-like item ids, UUID-like user ids, its own
    header names, a title only this encoding spells."""
    ratings_file, items_file = tmp_path / "ratings.csv", tmp_path / "products.csv"
    ratings_file.write_text("customer,sku,stars,time\n" + "".join(
        f"cust-{u:04x},B00{i:07d},{r / 2},{t}\n" for u, i, r, t in RATINGS), encoding=encoding)
    items_file.write_text("sku,name,tags\n" + "".join(
        f'B00{i:07d},"{title} - Misérables",{genres}\n' for i, (title, genres) in MOVIES.items()), encoding=encoding)
    return ratings_file, items_file


TEXT_COLUMNS = ["--column", "user_id=customer", "--column", "item_id=sku", "--column", "rating=stars",
                "--column", "timestamp=time", "--column", "title=name", "--column", "genres=tags"]


def test_text_ids_are_hashed_stably_and_mapped_back(tmp_path):
    ratings_file, items_file = _text_id_log(tmp_path, "latin-1")
    columns = dict(c.split("=") for c in TEXT_COLUMNS[1::2])
    with pytest.raises(rr.RatingsImportError, match=r"products.csv: not utf-8 text: name the file's encoding"):
        rf.read_own_log(ratings_file, items_file, rf.LogDialect(columns))
    ratings, items = rf.read_own_log(ratings_file, items_file, rf.LogDialect(columns, encoding="latin-1"))
    report = ri.import_ratings(tmp_path / "raw", ratings, items, 4.5)
    assert report.hashed_ids == ["user", "item"] and report.events == len(RATINGS)
    events = [e for day in (DAY1, DAY2) for e in _events(tmp_path / "raw", day)]
    assert sorted(e[F.ITEM_ID] for e in events) == sorted(rr.contract_id(f"B00{i:07d}") for _, i, _, _ in RATINGS)
    assert {e[F.USER_ID] for e in events} == {rr.contract_id(f"cust-{u:04x}") for u, *_ in RATINGS}
    catalog = _items(tmp_path / "raw", DAY2).to_pylist()
    assert {r[F.ITEM_ID] for r in catalog} >= {e[F.ITEM_ID] for e in events}   # ratings and items hashed alike
    assert all(r[F.TITLE].endswith("- Misérables") for r in catalog)
    items_map = pq.read_table(tmp_path / "raw" / ri.ID_MAP_DIR / "items.parquet").to_pylist()
    skus = [f"B00{i:07d}" for i in MOVIES]
    assert {m["source_id"]: m["id"] for m in items_map} == {s: rr.contract_id(s) for s in skus}
    users_map = pq.read_table(tmp_path / "raw" / ri.ID_MAP_DIR / "users.parquet").to_pylist()
    assert len(users_map) == len({u for u, *_ in RATINGS}) and all(1 <= m["id"] < 2**63 for m in users_map)
    # history ids are the hashed item ids too
    assert {h for e in events for h in e[F.HISTORY]} <= {e[F.ITEM_ID] for e in events}
    # a re-import of a log with integer ids keeps them and removes the stale maps
    ri.import_ratings(tmp_path / "raw", *rf.read_movietweetings(*_movietweetings(tmp_path)), 9.0)
    assert not list((tmp_path / "raw" / ri.ID_MAP_DIR).iterdir())


def test_one_odd_id_hashes_every_id_of_its_kind_in_both_files():
    import pyarrow as pa

    ratings, ids, hashed = rr.parse_log(pa.array(["1", "2"]), pa.array(["10", "0"]), pa.array(["1", "2"]),
                                   pa.array(["100", "200"]), pa.array(["10", "0", "30"]),
                                   (("r", None), ("i", None)))
    assert hashed and ratings.user.tolist() == [1, 2]                     # users stay integers
    assert ratings.item.tolist() == [rr.contract_id("10"), rr.contract_id("0")]
    assert ids.tolist() == [rr.contract_id(v) for v in ("10", "0", "30")]
    assert rr.contract_id(" B00X ") == rr.contract_id("B00X") != rr.contract_id("B00Y")
    big = "123456789012345678901234"                                      # an integer past int64: an id
    ratings, _, _ = rr.parse_log(pa.array([big, "2"]), pa.array(["10", "10"]), pa.array(["1", "2"]),
                            pa.array(["100", "200"]), pa.array(["10"]), (("r", None), ("i", None)))
    assert ratings.user.tolist() == [rr.contract_id(big), rr.contract_id("2")]


def test_cli_maps_columns_and_decodes_latin1(tmp_path):
    ratings_file, items_file = _text_id_log(tmp_path, "latin-1")
    out = subprocess.run([sys.executable, "-m", "pipeline", "import-ratings", "--format", "csv", "--ratings",
                          str(ratings_file), "--items", str(items_file), "--positive-min", "4.5", "--out",
                          str(tmp_path / "raw"), "--encoding", "latin-1", *TEXT_COLUMNS],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"hashed_ids": [\n    "user",\n    "item"\n  ]' in out.stdout
    assert (tmp_path / "raw" / ri.ID_MAP_DIR / "items.parquet").exists()


def test_real_days_with_imdb_ids_pass_validate_like_the_integer_import(tmp_path):
    """The vendored days written as a CSV with MovieTweetings' own IMDb ids ('tt0012349') and
    MovieLens-style headers: the same rows reach validate, under hashed ids."""
    from components.validate import run

    ratings, items = rf.read_movietweetings(rf.MOVIETWEETINGS_DIR / "ratings.dat", rf.MOVIETWEETINGS_DIR / "movies.dat")
    ratings_file, items_file = tmp_path / "ratings.csv", tmp_path / "movies.csv"
    ratings_file.write_text("userId,movieId,rating,timestamp\n" + "".join(
        f"{u},tt{i:07d},{r:g},{t // 1_000_000}\n" for u, i, r, t in zip(ratings.user, ratings.item, ratings.rating,
                                                                       ratings.ts_us, strict=True)))
    with open(items_file, "w", newline="") as out:
        import csv

        writer = csv.writer(out)
        writer.writerow(["movieId", "title", "genres"])
        writer.writerows(zip([f"tt{i:07d}" for i in items.item_id], items.title.to_pylist(),
                             items.genres.to_pylist(), strict=True))
    text_ratings, text_items = rf.read_own_log(ratings_file, items_file,
                                               rf.LogDialect({"user_id": "userId", "item_id": "movieId"}))
    report = ri.import_ratings(tmp_path / "raw", text_ratings, text_items, ri.MOVIETWEETINGS_POSITIVE_MIN,
                               dt.date(2013, 8, 29), dt.date(2013, 9, 1))
    assert report.hashed_ids == ["item"] and [d["events"] for d in report.days] == [654, 759, 1080, 799]
    config = load_config(overrides={"data.raw_root": str(tmp_path / "raw"), "data.artifact_root": str(tmp_path / "art"),
                                     "window.train_days": 3}, env={})
    result = run(config, RunPaths.for_run(config, dt.date(2013, 9, 1), "import"))
    assert result.rows == {"2013-08-29": 654, "2013-08-30": 759, "2013-08-31": 1080, "2013-09-01": 799}
