#!/usr/bin/env bash
# Megatron-LM's weak-scaling table (Narayanan et al., "Efficient Large-Scale Language Model Training on
# GPU Clusters Using Megatron-LM", SC'21, Table 1: GPT models of 1.7B to 1T parameters on 32 to 3,072
# A100s of Selene, vocabulary 51,200, sequence 2,048, with activation recomputation), predicted by
# pipetwin with ONE device setting for every row (platforms/selene-dgx-a100.json: matmul_efficiency,
# matmul_half_dimension) and no per-row tuning: for each row, `pipetwin search` restricted to the row's
# tensor parallelism t and p stages (data-parallel degree d = GPUs / (t p)), full recomputation,
# microbatch 1, 1F1B, no sequence parallelism (its on-paper estimate: paper_s), then `pipetwin simulate`
# of the plan it writes (batch microbatches in all, round robin over the d replicas); achieved TFLOP/s per GPU =
# Narayanan's F = 96 B s L h^2 (1 + s/(6h) + V/(16 L h)) over (predicted iteration time x GPUs).
# Prints predicted against published TFLOP/s per GPU, the error, and the median and max |error|;
# writes bench-results/megatron_weak_scaling.csv. Targets (issue 16): every row within 10%, median 5%.
# Usage: bench/megatron_weak_scaling.sh [BUILD_DIR] [ROWS] (ROWS: a range such as 1-7 or a list such as
# 1,3,5); CLUSTER=file to try another device setting, OUT=prefix for the results.
set -euo pipefail
build=${1:-build}
rows=${2:-1-10}
cluster=${CLUSTER:-platforms/selene-dgx-a100.json}
out=${OUT:-bench-results/megatron_weak_scaling}
mkdir -p "$out"
# params_B heads hidden layers t p gpus batch published_tflops
table="1.7 24 2304 24 1 1 32 512 137
3.6 32 3072 30 2 1 64 512 138
7.5 32 4096 36 4 1 128 512 142
18.4 48 6144 40 8 1 256 1024 135
39.1 64 8192 48 8 2 512 1536 138
76.1 80 10240 60 8 4 1024 1792 140
145.6 96 12288 80 8 8 1536 2304 148
310.1 128 16384 96 8 16 1920 2160 155
529.6 128 20480 105 8 35 2520 2520 163
1008.0 160 25600 128 8 64 3072 3072 163"
selected() {  # is row $1 in $rows?
  local part
  for part in ${rows//,/ }; do
    if [[ $part == *-* ]]; then
      [ "$1" -ge "${part%-*}" ] && [ "$1" -le "${part#*-}" ] && return 0
    elif [ "$1" -eq "$part" ]; then
      return 0
    fi
  done
  return 1
}
csv="$out.csv"
echo "params_B,tp,pp,dp,gpus,batch,microbatches,paper_iteration_s,predicted_iteration_s,predicted_tflops,published_tflops,error_pct" > "$csv.tmp"
printf '%8s %3s %3s %4s %5s %6s %9s %10s %10s %9s %7s\n' params tp pp dp gpus batch paper_s iter_s predicted published error
n=0
while read -r params heads hidden layers t p gpus batch published; do
  n=$((n + 1))
  selected "$n" || continue
  d=$((gpus / (t * p)))
  m=$batch
  tag="gpt-${params}b"
  "$build/pipetwin" search --layers "$layers" --hidden "$hidden" --ffn-hidden $((4 * hidden)) --heads "$heads" \
    --kv-heads "$heads" --vocabulary 51200 --sequence-length 2048 --linear-biases true --dropout true \
    --tied-embeddings true --learned-positions true --cluster "$cluster" -n "$gpus" --global-batch "$batch" \
    --tp "$t" --stages "$p" --microbatch-sizes 1 --recompute full --schedules 1f1b --no-sequence-parallel \
    --ignore-memory -o "$out/$tag" > "$out/$tag-search.txt" 2> /dev/null
  paper_s=$(sed -n 's/^Chosen: [^,]*, \([0-9.e+-]*\) s per iteration.*/\1/p' "$out/$tag-search.txt")
  "$build/pipetwin" simulate --cluster "$out/$tag/cluster.json" --plan "$out/$tag/plan.json" -s 1f1b -m "$m" \
    --iterations 1 --warmup 0 --ignore-memory > "$out/$tag-simulate.txt"
  iteration_s=$(awk '/^Time per iteration:/ { print $4 }' "$out/$tag-simulate.txt")
  line=$(awk -v B="$batch" -v L="$layers" -v h="$hidden" -v it="$iteration_s" -v g="$gpus" -v pub="$published" 'BEGIN {
    s = 2048; V = 51200
    F = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
    tf = F / (it * g) / 1e12
    printf "%.4f %.1f %.1f", it, tf, 100 * (tf - pub) / pub }')
  read -r iteration tflops error <<< "$line"
  printf '%8s %3s %3s %4s %5s %6s %9.4f %10s %10s %9s %6s%%\n' "$params" "$t" "$p" "$d" "$gpus" "$batch" "$paper_s" \
    "$iteration" "$tflops" "$published" "$error"
  echo "$params,$t,$p,$d,$gpus,$batch,$m,$paper_s,$iteration,$tflops,$published,$error" >> "$csv.tmp"
done <<< "$table"
mv "$csv.tmp" "$csv"
tail -n +2 "$csv" | awk -F, '{ e = $12 < 0 ? -$12 : $12; print e }' | sort -g | awk '{ a[NR] = $1 }
  END { med = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
        printf "median |error| %.1f%%, max |error| %.1f%% over %d rows (targets: 5%%, 10%%)\n", med, a[NR], NR }'
echo "written: $csv"
