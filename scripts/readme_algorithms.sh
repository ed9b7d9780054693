#!/bin/sh
# The README's comparison of every algorithm (digits: 5 seeds; Fashion-MNIST: 3 seeds) and the data-distance
# lesson. A plain script (the sweep engine is being built elsewhere): run from the repository root.
# One torch thread per process, as the README's other tables (the machine is shared).
set -e
export OMP_NUM_THREADS=1
ALGOS=clove,ifca,cfl,fesem,flexcfl,pacfl,kfed,fedavg,fedprox,local,perfedavg,fedproto,fedala,fedpac,oracle

python scripts/seed_table.py --partitions feature-skew,concept-shift,label-skew-3,iid --algorithms $ALGOS \
    --seeds 0,1,2,3,4 --rounds 30 --device cpu --out runs/readme/digits-all
# label-skew-1 on 10 classes: 5 clusters of two classes, at most 53 samples per client without repeats
python scripts/seed_table.py --partitions label-skew-1 --clusters 5 --samples-per-client 50 --algorithms $ALGOS \
    --seeds 0,1,2,3,4 --rounds 30 --device cpu --out runs/readme/digits-all-ls1
# Fashion-MNIST with the CNN, as the README's earlier Fashion-MNIST table
python scripts/seed_table.py --dataset fashion-mnist --partitions feature-skew,concept-shift,label-skew-1 \
    --clusters-for label-skew-1=5 --algorithms $ALGOS --seeds 0,1,2 --clusters 4 --clients-per-cluster 5 \
    --samples-per-client 200 --rounds 30 --lr 0.05 --device cpu --out runs/readme/fmnist-all
