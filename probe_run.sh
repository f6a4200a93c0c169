# temporary: this session's measurements (not committed)
unset AKUNU_VALIDATION
F=""
for s in 1b:q4_0 llama2-7b:q4_0 llama2-7b:q8_0; do n=${s%%:*}; t=${s##*:}; python3 $AKUNU_MAKE_RANDOM_GGUF --shape $n --type $t -o /tmp/b-$n-$t.gguf >/dev/null; F="$F /tmp/b-$n-$t.gguf"; done
for probe in 0 6; do
  echo "== 7b q4_0 probe $probe" >> $OUT/profiles.txt
  AKUNU_GEMV_TILES=16:2:128:$probe python3 -m akunu profile /tmp/b-llama2-7b-q4_0.gguf --by label >> $OUT/profiles.txt 2>&1
done
python3 bench/decode_variants.py $F --variant math_nox=AKUNU_GEMV_TILES=16:2:128:6 2>&1 | tee $OUT/variants.txt
