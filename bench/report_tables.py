"""The tables of docs/benchmarks.md, as bench/report.py renders them: a block name -> its tables.

A table is (header, rows); a row is (JSON, cell, ...) and gets a source column naming its JSON.
A cell is a str.format_map template over that JSON's figures (plus bench/report.py `derived`'s), or
a check (figure, operator, goal figure) rendered as met?. A block is a list of tables and (JSON,
line) notes.
"""
from __future__ import annotations

from bench.common import GOAL_REACH_EVENTS_PER_DAY
from pipeline.datagen.regimes import REGIMES


def each(values: tuple[str, ...], *rows: tuple) -> list[tuple]:
    """`rows` once per value, "@" replaced by it everywhere: one row per architecture, size or JSON."""
    sub = lambda x, v: x.replace("@", v) if isinstance(x, str) else tuple(sub(y, v) for y in x)
    return [sub(row, v) for v in values for row in rows]


SUMMARY = (["benchmark", "figure", "measured", "reference (same run)", "ratio", "goal", "met?"], [
    ("generate", "generate", "events/s at {events:,} events", "{events_per_s:,.0f}",
     "Parquet write of the same rows: {parquet_write_events_per_s:,.0f}/s", "{ratio_to_parquet_write:.3g}",
     "≥ {target_events_per_s:,} events/s", ("events_per_s", "≥", "target_events_per_s")),
    ("generate", "generate", "peak RSS at {events:,} events", "{peak_rss_mib:,.0f} MiB", "", "", "", ""),
    *each(("preprocess", "preprocess_1m"), (
        "@", "preprocess", "events/s, {events:,} events end to end", "{events_per_s:,.0f}",
        "raw TFRecord rewrite of the same examples: {raw_rewrite_events_per_s:,.0f}/s", "**{ratio_to_raw:.3g}**",
        "≥ {target_ratio:g}", ("ratio_to_raw", "≥", "target_ratio"))),
    ("scale", "scale", "events/s at {events_3m:,} events (validate → preprocess → stage)", "{events_per_s_3m:,.0f}",
     "same at {events_1m:,}: {events_per_s_1m:,.0f}/s", "**{rate_3m_to_1m:.3g}**", "≥ {goal_rate:g} (linear)",
     ("rate_3m_to_1m", "≥", "goal_rate")),
    ("scale", "scale", "peak RSS of the process tree, largest over the sizes", "{peak_rss_mib_max:,.0f} MiB", "", "",
     "< {goal_rss:,.0f} MiB at every size", ("peak_rss_mib_max", "<", "goal_rss")),
    *each(("din", "reference"), (
        "train", "train (@)", "examples/s, 2-worker gang × 1 core each (median of {repeats} rounds)",
        "{examples_per_s_2_workers_@:,.0f}",
        "forward+backward only, one process, 2 cores: {fwdbwd_examples_per_s_@:,.0f}/s",
        "**{gang_to_fwdbwd_ratio_@:.3g}** (min {gang_to_fwdbwd_ratio_min_@:.3g})", "≥ {goal_gang_to_fwdbwd_ratio:g}",
        ("gang_to_fwdbwd_ratio_@", "≥", "goal_gang_to_fwdbwd_ratio")), (
        "train", "train (@)", "examples/s, 2 workers × 1 core vs 1 worker × 2 cores (median of {repeats} rounds)",
        "{examples_per_s_2_workers_@:,.0f}", "{examples_per_s_1_worker_@:,.0f}/s",
        "**{mwms_efficiency_@:.3g}** ({mwms_efficiency_min_@:.3g}–{mwms_efficiency_max_@:.3g})",
        "≥ {goal_mwms_efficiency:g}", ("mwms_efficiency_@", "≥", "goal_mwms_efficiency"))),
    ("train", "train", "input pipeline, examples/s (median of {input_runs_n} runs)", "{input_examples_per_s:,.0f}",
     "bare read + parse of the same files: {bare_read_parse_examples_per_s:,.0f}/s",
     "**{input_ratio_to_bare:.3g}** (runs {input_runs})", "≥ {goal_input_ratio_to_bare:g}",
     ("input_ratio_to_bare", "≥", "goal_input_ratio_to_bare")),
    ("train", "train", "input pipeline / trainer consumption", "{input_to_trainer_ratio:.3g}×", "", "",
     "≥ {goal_input_to_trainer_ratio:g}×", ("input_to_trainer_ratio", "≥", "goal_input_to_trainer_ratio")),
    ("verify", "verify", "train's check of the staged copy (sha256 of {staged_mib:,.1f} MiB), median of {repeats}",
     "{verify_s:.2f} s", "2-worker gang on the same files, wall: {train_wall_s:.0f} s",
     "**{verify_to_train_ratio:.3g}**",
     "≤ {goal_verify_to_train_ratio:g}", ("verify_to_train_ratio", "≤", "goal_verify_to_train_ratio")),
    *each(("serving", "serving_reference"), *[(
        "@", "serving ({arch}, {export} export)", f"batch-1 raw-feature predict {q}, median of {{processes}} processes",
        f"{{{q}_ms:.3f}} ms ({{{q}_list}})",
        f"{{alt_export}} export of the same weights, same processes: {{alt_{q}_ms:.3f}} ms",
        "{alt_over_export_p50:.3g}× (other / this)" if q == "p50" else "", f"< {{goal_{q}_ms:g}} ms",
        (f"{q}_ms", "<", f"goal_{q}_ms")) for q in ("p50", "p99")]),
    *each(("demo", "large"), (
        "quality", "quality (@)", "model AUC, median of {seeds_@} seeds", "{auc_model_@:.3f}",
        "best baseline ({best_baseline_@}): {auc_best_baseline_@:.3f}", "+{auc_over_best_baseline_@:.3f}",
        "{goal_text_@}", "{met_@}")),
    ("quality", "quality (demo)", "model log loss, median of {seeds_demo} seeds", "{logloss_model_demo:.3f}",
     "constant: {logloss_constant_demo:.3f}", "", "below the constant",
     ("logloss_model_demo", "<", "logloss_constant_demo")),
    ("epochs", "quality", "eval AUC lost by doubling the epoch cap ({epochs_cap_demo} → {cap_twice}), worse size",
     "{more_epochs_auc_drop:.3f}", "demo {more_epochs_auc_drop_demo:.3f}; large {more_epochs_auc_drop_large:.3f}", "",
     "≤ {goal_more_epochs_auc_drop:g}", ("more_epochs_auc_drop", "≤", "goal_more_epochs_auc_drop")),
    ("warm_start", "quality (demo)", "warm start vs cold start: eval AUC / train wall",
     "{auc_warm_start:.3f} / {train_s_warm_start:.1f} s", "cold {auc_cold_start:.3f} / {train_s_cold_start:.1f} s",
     "time {warm_over_cold_train_s:.3g}×", "", ""),
    ("demo", "demo", "`make demo` wall time", "{wall_s:.0f} s", "", "", "< {target_wall_s:g} s",
     ("wall_s", "<", "target_wall_s")),
    ("demo", "demo", "second nights that left the better model serving (candidate or kept)",
     "{nights_serving_the_better} of {nights_judged}", "{runs} fresh runs", "", "every night",
     ("nights_serving_the_better", "≥", "nights_judged")),
    ("demo", "demo", "orchestration overhead (DAG runs − task bodies) / DAG runs", "{overhead_fraction:.0%}",
     "task bodies {task_s:.0f} s of {dag_runs_s:.0f} s", "", "", ""),
])
PREPROCESS = (["events", "Beam mode", "wall", "events/s", "raw rewrite, events/s", "ratio", "goal", "met?",
               "peak RSS (tree)", "output", "fixed cost (est.)", "marginal events/s", "load"],
              each(("preprocess", "preprocess_1m", "preprocess_1m_multi_processing"), (
                  "@", "{events:,}", "{running_mode}", "{seconds:.1f} s", "{events_per_s:,.0f}",
                  "{raw_rewrite_events_per_s:,.0f}", "{ratio_to_raw:.3g}", "≥ {target_ratio:g}",
                  ("ratio_to_raw", "≥", "target_ratio"), "{peak_rss_mib:,.0f} MiB", "{output_mib:,.0f} MiB",
                  "{fixed_cost}", "{marginal}", "{load_avg_1m:.1f}")))
SCALE_SIZES = (["events", "validate", "preprocess", "stage", "total", "events/s", "peak RSS (tree)", "disk kept",
                "bytes per example", "item table"],
               each(("0_25m", "1m", "3m"), (
                   "scale", "{events_@:,}", "{validate_seconds_@:.1f} s", "{preprocess_seconds_@:.1f} s",
                   "{stage_seconds_@:.1f} s", "{seconds_@:.1f} s", "{events_per_s_@:,.0f}", "{peak_rss_mib_@:,.0f} MiB",
                   "{disk_mib_written_@:,.0f} MiB", "{bytes_per_example_@:,.0f}", "{item_table_mib_@:,.1f} MiB")))
SCALE_STAGES = (["events", "stage", "seconds", "RSS before → after (child process)", "written"],
                each(("0_25m", "1m", "3m"), *[
                    ("scale", "{events_@:,}", stage, f"{{{stage}_seconds_@:.1f}} s",
                     f"{{{stage}_rss_mib_before_@:,.0f}} → {{{stage}_rss_mib_after_@:,.0f}} MiB", written)
                    for stage, written in (("validate", ""),
                                           ("preprocess", "{shards_mib_@:,.0f} MiB shards + item table, "
                                                          "{transform_mib_@:,.1f} MiB transform"),
                                           ("stage", "{staged_mib_@:,.0f} MiB staged copy"))]))
SCALE_FIT = (["figure", "value", "goal", "met?"], [
    ("scale", "`rate_3m_to_1m`", "{rate_3m_to_1m:.3g}", "≥ {goal_rate:g}", ("rate_3m_to_1m", "≥", "goal_rate")),
    ("scale", "largest peak RSS", "{peak_rss_mib_max:,.0f} MiB", "< {goal_rss:,.0f} MiB",
     ("peak_rss_mib_max", "<", "goal_rss")),
    ("scale", "largest bytes per example", "{bytes_per_example_max:,.0f}", "≤ {goal_bytes:g}",
     ("bytes_per_example_max", "≤", "goal_bytes")),
    ("scale", "disk written at 3 M events (shards, item table, transform, staged copy)", "{disk_gb_written_3m:.2f} GB",
     "≤ {goal_gb:g} GB", ("disk_gb_written_3m", "≤", "goal_gb")),
    ("scale", "events/s at 3 M events", "{events_per_s_3m:,.0f}", "≥ {goal_rate_3m:,.0f}",
     ("events_per_s_3m", "≥", "goal_rate_3m")),
    ("scale", "fitted cost", "{fitted_fixed_seconds:g} s fixed + {fitted_us_per_event:g} µs per event "
     "(≈ {marginal_rate:,.0f} events/s marginal)", "", ""),
    ("scale", "1-minute load average before the run", "{load_avg_1m:.1f}", "", ""),
])
ENCODER = (["encoder (id-only examples)", "examples/s", "bytes per example"], [
    ("encoder", "hand-written splicing (components/preprocess/examples.py), {examples:,} examples",
     "{hand_written_examples_per_s:,.0f}", "{hand_written_bytes_per_example:.1f}"),
    ("encoder", "tfx_bsl `RecordBatchToExamplesEncoder`", "{tfx_bsl_examples_per_s:,.0f}",
     "{tfx_bsl_bytes_per_example:.1f}"),
    ("encoder", "tfx_bsl ÷ hand-written (the hand-written one stays for its deterministic bytes)",
     "**{tfx_bsl_ratio_to_hand_written:.3g}**", ""),
])
TRAIN_SETUP = ("train", "Setup: {model}; batches of {batch_size_per_replica} per replica, "
               "{train_examples_per_epoch:,} training examples per epoch, {epochs} epochs, ids {ids}; {repeats} "
               "rounds, medians; 1-minute load {loadavg_before:.1f} before the run, {loadavg_after:.1f} after "
               "(`train.json`).")
TRAIN_RATES = (["architecture", "forward + backward only, 1 process × 2 cores", "Keras train step, 1 process",
                "gang, 1 worker × 2 cores", "gang, 2 workers × 1 core", "2-worker steady-state steps",
                "epoch-end work between epochs, 2 workers", "backup after the last step, 2 workers"],
               each(("din", "reference"), (
                   "train", "@", "{fwdbwd_examples_per_s_@:,.0f}/s", "{single_process_step_examples_per_s_@:,.0f}/s",
                   "{examples_per_s_1_worker_@:,.0f}/s", "{examples_per_s_2_workers_@:,.0f}/s",
                   "{steady_examples_per_s_2_workers_@:,.0f}/s", "{epoch_end_s_2_workers_@:.1f} s",
                   "{backup_s_2_workers_@:.1f} s")))
TRAIN_RATIOS = (["architecture", "`gang_to_fwdbwd_ratio` (min of rounds)", "goal", "met?",
                 "`mwms_efficiency` (rounds' range)", "goal", "met?"],
                each(("din", "reference"), (
                    "train", "@", "**{gang_to_fwdbwd_ratio_@:.3g}** ({gang_to_fwdbwd_ratio_min_@:.3g})",
                    "≥ {goal_gang_to_fwdbwd_ratio:g}", ("gang_to_fwdbwd_ratio_@", "≥", "goal_gang_to_fwdbwd_ratio"),
                    "**{mwms_efficiency_@:.3g}** ({mwms_efficiency_min_@:.3g}–{mwms_efficiency_max_@:.3g})",
                    "≥ {goal_mwms_efficiency:g}", ("mwms_efficiency_@", "≥", "goal_mwms_efficiency"))))
SERVING = (["architecture", "export", "p50 per process → median", "p99 per process → median",
            "other export, same processes: p50 / p99", "other / this, p50", "goal p50 / p99", "met?", "load"],
           each(("serving", "serving_reference"), (
               "@", "{arch}", "{export}", "{p50_list} → **{p50_ms:.3f} ms**", "{p99_list} → **{p99_ms:.3f} ms**",
               "{alt_export}: {alt_p50_ms:.3f} / {alt_p99_ms:.3f} ms", "{alt_over_export_p50:.3g}×",
               "< {goal_p50_ms:g} / < {goal_p99_ms:g} ms", "{met_goal}", "{load_avg_1m:.1f}")))
SERVING_BY_ID = (["architecture", "by-id p50 per process → median", "by-id p99 per process → median",
                  "by id / raw, p50", "goal p50 / p99", "met?"],
                 each(("serving", "serving_reference"), (
                     "@", "{arch}", "{by_id_p50_list} → **{by_id_p50_ms:.3f} ms**",
                     "{by_id_p99_list} → **{by_id_p99_ms:.3f} ms**", "{by_id_over_raw_p50:.3g}×",
                     "≤ {goal_by_id_p50_ms:g} / ≤ {goal_by_id_p99_ms:g} ms", "{met_by_id_goal}")))
SERVING_FOOTPRINT = (["architecture", "first call", "SavedModel", "TF Lite core model p50 / p99 (builtins, batch 1)",
                      "SavedModel core model p50"],
                     each(("serving", "serving_reference"), (
                         "@", "{arch}", "{first_call_s:.2f} s", "{saved_model_mib:,.0f} MiB",
                         "{tflite_p50_ms:.3f} / {tflite_p99_ms:.3f} ms", "{savedmodel_core_p50_ms:.3f} ms")))
QUALITY = (["size", "model AUC / log loss (median)", "AUC per seed (spread)", "best baseline (which)",
            "LR content + history", "LR user + item", "item CTR", "constant log loss", "ceiling", "lift fraction",
            "train wall (median)", "goal", "met?"], [
    *each(("demo", "large"), (
        "quality", "@", "**{auc_model_@:.3f}** / {logloss_model_@:.3f}", "{seeds_list_@} ({auc_seed_spread_@:.3f})",
        "{auc_best_baseline_@:.3f} ({best_baseline_@})", "{auc_lr_content_history_@:.3f}", "{auc_lr_user_item_@:.3f}",
        "{auc_item_ctr_@:.3f}", "{logloss_constant_@:.3f}", "{ceiling_auc_@:.3f}", "{lift_fraction_@:.2f}",
        "{train_s_@:.1f} s", "{goal_text_@}", "{met_@}")),
    ("quality", "large, seed architecture", "{auc_reference_arch_large:.3f} / {logloss_reference_arch_large:.3f}",
     "one run", *[""] * 7, "{train_s_reference_arch_large:.1f} s", "", ""),
])
QUALITY_REGIMES = (["regime (demo size)", "model AUC (median)", "AUC per seed (spread)", "best baseline (which)",
                    "item CTR", "LR user + item", "LR content + history", "LR item + history + user",
                    "model − best baseline", "lift asked (content ceiling − best baseline)", "ceiling",
                    "appeal ceiling", "content ceiling", "met?"],
                   each(tuple(f"{r}_demo" for r in REGIMES), (
                       "quality", "`@`", "**{auc_model_@:.3f}**", "{seeds_list_@} ({auc_seed_spread_@:.3f})",
                       "{auc_best_baseline_@:.3f} ({best_baseline_@})", "{auc_item_ctr_@:.3f}",
                       "{auc_lr_user_item_@:.3f}", "{auc_lr_content_history_@:.3f}",
                       "{auc_lr_item_history_user_@:.3f}", "{auc_over_best_baseline_@:+.4f}",
                       "+{asked_@:.3f} ({room_@:+.3f})", "{ceiling_auc_@:.3f}",
                       "{ceiling_appeal_auc_@:.3f}", "{ceiling_content_auc_@:.3f}", "{met_@}")))
GOAL_REACH = (["regime", "events per day (window rows)", "item CTR", "best baseline (which)", "goal AUC",
               "appeal ceiling", "content ceiling", "ceiling", "goal − content ceiling", "goal − ceiling"],
              each(tuple(f"{r}_{n}" for r in REGIMES for n in GOAL_REACH_EVENTS_PER_DAY), (
                  "goal_reach", "`{regime_@}`", "{events_per_day_@:,} ({window_rows_@:,})", "{auc_item_ctr_@:.3f}",
                  "{auc_best_baseline_@:.3f} ({best_baseline_@})", "**{goal_auc_@:.3f}**",
                  "{ceiling_appeal_auc_@:.3f}", "{ceiling_content_auc_@:.3f}", "{ceiling_auc_@:.3f}",
                  "{goal_over_content_@:+.3f}", "{goal_over_ceiling_@:+.3f}")))
ENSEMBLE = (["regime (demo size)", "each seed (median)", "each pair", "all three", "all three − median seed",
             "train wall per model (median)"],
            each(tuple(REGIMES), (
                "exp_ensemble", "`@`", "{seeds_list_@} ({auc_seeds_median_@:.3f})", "{pairs_list_@}",
                "**{auc_all_@:.3f}**", "{auc_all_over_median_seed_@:+.3f}", "{train_s_per_model_@:.1f} s")))
ABLATION_REGIMES = ("default", "popularity", "ratings_like")
ABLATION = (["mechanism switched off", "override", *(f"{r}: on / off (gain)" for r in ABLATION_REGIMES)],
            [*each(("", "_now"), ("ablation", "defaults (reference, {commit@})", "",
                                  *(f"{{auc_on@_{r}:.4f}} (spread {{spread_on@_{r}:.3f}})" for r in ABLATION_REGIMES))),
             *each(("wide_bias", "dropout", "user_memory", "embedding_l2", "attention", "interactions"), (
                 "ablation", "{label_@}", "`{override_@}`",
                 *(f"{{ref_on_@_{g}:.4f}} / {{auc_off_@_{g}:.4f}} (**{{gain_@_{g}:+.4f}}**)"
                   for g in ABLATION_REGIMES)))])
ABLATION_PLATT = (["mechanism switched off", "override", *(f"{r}: log loss on / off (gain); AUC on / off"
                                                           for r in ABLATION_REGIMES)],
                  [("ablation", "{label_platt} ({commit_platt}; on: the same model's regime run)", "`{override_platt}`",
                    *(f"{{logloss_on_platt_{r}:.4f}} / {{logloss_off_platt_{r}:.4f}} "
                      f"(**{{logloss_gain_platt_{r}:+.4f}}**); {{auc_on_platt_{r}:.4f}} / {{auc_off_platt_{r}:.4f}}"
                      for r in ABLATION_REGIMES))])
ABLATION_MT = (["mechanism switched off", "candidate AUC per night", "mean (gain of the mechanism)"],
               [("ablation", "none (defaults, {commit})", "{mt_on_list}", "{mt_mean_on:.4f}"),
                ("ablation", "none (defaults, {commit_now})", "{mt_on_now_list}", "{mt_mean_on_now:.4f}"),
                ("ablation", "attention, dropout and embedding L2 all removed ({commit_pruned})", "{mt_pruned_list}",
                 "{mt_mean_pruned:.4f}"),
                ("ablation", "LR item + history + user (reference)", "{mt_lr_list}", "{mt_mean_lr:.4f}"),
                *each(("wide_bias", "dropout", "embedding_l2", "attention", "interactions"), (
                    "ablation", "{label_@}", "{mt_off_list_@}",
                    "{mt_mean_off_@:.4f} (**{mt_gain_@:+.4f}**)"))])
EPOCHS = (["size", "epoch cap", "eval AUC, cap", "eval AUC, twice the cap", "best epoch (twice the cap)", "drop",
           "goal", "met?"],
          each(("demo", "large"), (
              "epochs", "@", "{epochs_cap_@}", "{auc_epochs_cap_@:.3f}", "{auc_twice_the_epochs_@:.3f}",
              "{best_epoch_twice_the_epochs_@:g}", "{more_epochs_auc_drop_@:.3f}", "≤ {goal_more_epochs_auc_drop:g}",
              ("more_epochs_auc_drop_@", "≤", "goal_more_epochs_auc_drop"))))
WARM_START = (["", "eval AUC", "log loss", "train wall", "preprocess wall", "best epoch"], [
    *each(("cold_start", "warm_start"), (
        "warm_start", "{label_@}", "{auc_@:.3f}", "{log_loss_@:.3f}", "{train_s_@:.1f} s", "{preprocess_s_@:.1f} s",
        "{best_epoch_@:g}")),
    ("warm_start", "warm / cold", "", "", "{warm_over_cold_train_s:.3g}×",
     "{warm_over_cold_preprocess_and_train_s:.3g}× (preprocess + train)", ""),
])
REPLAY_WORLDS = ("replay_movietweetings", "replay_drifting")
REPLAY_POLICIES_ORDER = ("gate", "push_unless_worse", "keep_unless_better", "better_with_confidence", "always_push",
                         "never_retrain", "popularity", "oracle")
REPLAY_GOALS = (["replay", "figure", "measured", "reference (same nights)", "difference", "goal", "met?"], [
    row for w in REPLAY_WORLDS for row in [
        (w, "{world}, {nights} nights", "the gate's rule (`{rule}`): served model, mean next-day AUC",
         "{rule_mean_next_day_auc:.4f}", "best other practical policy ({best_other_policy}): {best_other_mean:.4f}",
         "**{rule_minus_best_other:+.4f}**", "≥ {goal_rule_minus_best_other:+g}",
         ("rule_minus_best_other", "≥", "goal_rule_minus_best_other")),
        (w, "{world}", "the gate's rule: regret to the oracle (mean)", "{rule_regret_to_oracle:.4f}", "", "",
         "≤ {goal_regret_to_oracle:g}", ("rule_regret_to_oracle", "≤", "goal_regret_to_oracle")),
        (w, "{world}", "served model − item popularity, next day (mean)", "**{rule_minus_popularity_mean:+.4f}**",
         "above it on {rule_above_popularity_share:.0%} of nights", "", "≥ +{goal_rule_minus_popularity:g}",
         ("rule_minus_popularity_mean", "≥", "goal_rule_minus_popularity")),
        (w, "{world}", "served model − LR item + history + user, next day (mean)", "**{rule_minus_lr_mean:+.4f}**",
         "LR: {lr_item_history_user_mean:.4f}", "", "≥ +{goal_rule_minus_lr:g}",
         ("rule_minus_lr_mean", "≥", "goal_rule_minus_lr")),
    ]])
REPLAY_POLICIES = (["replay", "policy", "mean next-day AUC", "regret to oracle", "nights scored"], [
    (w, "{world}", p, f"{{{p}_mean_next_day_auc:.4f}}", f"{{{p}_regret_to_oracle:.4f}}", f"{{{p}_nights}}")
    for w in REPLAY_WORLDS for p in REPLAY_POLICIES_ORDER])
REPLAY_MODES = (["replay", "training mode", "the gate's rule: mean next-day AUC", "always push: mean next-day AUC",
                 "train seconds per night (mean)"], [
    (w, "{world}", "{mode}", "{rule_mean_next_day_auc:.4f}", "{always_push_mean_next_day_auc:.4f}",
     "{train_s_per_night:.1f} s") for w in ("replay_drifting", "replay_drifting_incremental",
                                            "replay_movietweetings", "replay_movietweetings_incremental")])
def window_cost_tables(name: str) -> list[tuple]:
    """The cost table and its goals for one daily volume's `bench window_cost` JSON."""
    costs = (["window", "night", "preprocess", "stage", "train", "preprocess + stage + train", "bytes written",
              "warm / cold"], each(("1", "7", "14"), *[(
                  name, "@-day", f"{night} ({{{night}_plan_@d}})", f"{{{night}_preprocess_@d:.1f}} s",
                  f"{{{night}_stage_@d:.2f}} s", f"{{{night}_train_@d:.1f}} s", f"**{{{night}_total_s_@d:.1f}} s**",
                  f"{{{night}_bytes_written_@d:,}}", "{warm_over_cold_@d:.2f}" if night == "warm" else "")
                  for night in ("cold", "warm")]))
    goals = (["goal", "measured", "goal", "met?"], [
        (name, "7-day window: warm night / cold night", "**{warm_over_cold_7d:.2f}**",
         "≤ {goal_warm_over_cold_7:g}", ("warm_over_cold_7d", "≤", "goal_warm_over_cold_7")),
        (name, "warm night: 14-day window / 7-day window", "**{warm14_over_warm7:.2f}**",
         "≤ {goal_warm14_over_warm7:g}", ("warm14_over_warm7", "≤", "goal_warm14_over_warm7"))])
    return [costs, goals]


BLOCKS = {"summary": [SUMMARY], "preprocess": [PREPROCESS], "scale": [SCALE_SIZES, SCALE_STAGES, SCALE_FIT],
          "encoder": [ENCODER],
          "train": [TRAIN_SETUP, TRAIN_RATES, TRAIN_RATIOS], "serving": [SERVING, SERVING_BY_ID, SERVING_FOOTPRINT],
          "quality": [QUALITY], "quality-regimes": [QUALITY_REGIMES], "goal-reach": [GOAL_REACH],
          "ensemble": [ENSEMBLE], "ablation": [ABLATION, ABLATION_PLATT], "ablation-movietweetings": [ABLATION_MT],
          "epochs": [EPOCHS], "warm-start": [WARM_START],
          "replay": [REPLAY_GOALS, REPLAY_POLICIES, REPLAY_MODES], "window-cost": window_cost_tables("window_cost"),
          "window-cost-100k": window_cost_tables("window_cost_100k")}
