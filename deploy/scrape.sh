#!/usr/bin/env bash
# One Prometheus scrape of several backends: fetches each one's /metrics and
# prints them as one valid exposition, every sample labelled with its
# instance (docs/scale-out.md).
#
#   deploy/scrape.sh INSTANCE=URL...
#   deploy/scrape.sh backend0=http://127.0.0.1:8000/backend/0/metrics \
#                    backend1=http://127.0.0.1:8000/backend/1/metrics
#
# A family's HELP and TYPE appear once, followed by the samples of every
# instance (the text format wants a family's lines together: two
# expositions pasted one after the other are not valid). A label "instance"
# that a backend already sets becomes "exported_instance", as Prometheus
# does. scrape_target_up{instance} is 1 for each instance that answered, 0
# (and a line on stderr) for one that did not. Exit status: 0 when at least
# one answered, 1 when none did, 2 on bad arguments.
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}
[ $# -ge 1 ] || {
  usage >&2
  exit 2
}
case $1 in -h | --help)
  usage
  exit 0
  ;;
esac
command -v curl >/dev/null || {
  echo "scrape: curl not found (Debian package curl)" >&2
  exit 2
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
names=()
n=0
answered=0
for a in "$@"; do
  name=${a%%=*}
  url=${a#*=}
  # The name goes into a label value unescaped: keep it to safe characters.
  if [ "$name" = "$a" ] || [ -z "$url" ] || ! [[ $name =~ ^[A-Za-z0-9_.:/-]+$ ]]; then
    echo "scrape: '$a': want INSTANCE=URL, INSTANCE of [A-Za-z0-9_.:/-]" >&2
    exit 2
  fi
  names+=("$name")
  if curl -fsS --max-time 5 -o "$tmp/$n" "$url" 2>"$tmp/$n.err"; then
    echo 1 >"$tmp/$n.up"
    answered=$((answered + 1))
  else
    echo "scrape: $name ($url): $(cat "$tmp/$n.err")" >&2
    : >"$tmp/$n"
    echo 0 >"$tmp/$n.up"
  fi
  n=$((n + 1))
done

# awk (mawk in Debian: no gensub): each file is one instance's exposition,
# its lines grouped by family as the format requires; a sample belongs to the
# family of the HELP/TYPE above it when its name extends that family's name
# (_bucket, _sum, _count), else to a family of its own name.
files=()
for ((i = 0; i < n; i++)); do files+=("$tmp/$i"); done
INSTANCES="${names[*]}" TMPDIR_SCRAPE=$tmp awk '
  BEGIN { ni = split(ENVIRON["INSTANCES"], inst, " "); dir = ENVIRON["TMPDIR_SCRAPE"] }
  # An empty file (an instance that did not answer) has no first line: the
  # instance is read from the file name.
  FILENAME != cur { cur = FILENAME; k = substr(FILENAME, length(dir) + 2) + 1; fam = "" }
  function family_of(name) {
    if (fam != "" && (name == fam || index(name, fam "_") == 1)) return fam
    fam = name
    return name
  }
  function see(f) { if (!(f in known)) { known[f] = 1; order[++nf] = f } }
  /^# (HELP|TYPE) / {
    fam = $3
    see(fam)
    if ($2 == "HELP" && !(fam in help)) help[fam] = $0
    if ($2 == "TYPE" && !(fam in type)) type[fam] = $0
    next
  }
  /^#/ || /^[ \t]*$/ { next }
  {
    line = $0
    brace = index(line, "{")
    space = index(line, " ")
    lab = "instance=\"" inst[k] "\""
    if (brace > 0 && brace < space) {
      name = substr(line, 1, brace - 1)
      rest = substr(line, brace + 1)
      sub(/^instance="/, "exported_instance=\"", rest)
      gsub(/,instance="/, ",exported_instance=\"", rest)
      line = name "{" lab (substr(rest, 1, 1) == "}" ? "" : ",") rest
    } else {
      name = substr(line, 1, space - 1)
      line = name "{" lab "}" substr(line, space)
    }
    f = family_of(name)
    see(f)
    samples[f] = samples[f] line "\n"
  }
  END {
    for (i = 1; i <= nf; i++) {
      f = order[i]
      if (f in help) print help[f]
      if (f in type) print type[f]
      printf "%s", samples[f]
    }
    print "# HELP scrape_target_up 1 if the instance answered this scrape, else 0."
    print "# TYPE scrape_target_up gauge"
    for (i = 1; i <= ni; i++) {
      getline up < (dir "/" (i - 1) ".up")
      printf "scrape_target_up{instance=\"%s\"} %s\n", inst[i], up
    }
  }' "${files[@]}"
[ "$answered" -gt 0 ]
