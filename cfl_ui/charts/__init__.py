"""Figures and tables built from records, and the page's look; imports only cfl_ui.jobs below it.

    draw            the one way a chart reaches a page: cached figures, the toolbar config, title and caption
    figures         plotly figure builders (plain dicts, the house style);  ifca_figures, partition_figures,
                    sweep_grid: the IFCA page's, the Partitions page's and the Sweeps page's figures
    embedding       loss-vector embeddings (raw, PCA, UMAP) per run and round;  rounds_drawn: which rounds a chart draws
    partition_facts a partition's facts and sample images, before any training
    tables          results as table rows, percentages and CSVs
    palette, theme  colours and symbols; the page's style, header and presenter mode
    literal         user-supplied text shown literally
"""
