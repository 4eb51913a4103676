# A daemon made the way daemons are: it leaves its session (setsid), forks
# twice so that its parent is gone, and ignores SIGHUP and SIGTERM.
# Writes the session leader's pid to $1/setsid.pid and the grandchild's to
# $1/double.pid (each file appears whole). Run as: sh daemonize.sh DIR
setsid sh -c '
trap "" HUP TERM
echo $$ > "$0/setsid.tmp"; mv "$0/setsid.tmp" "$0/setsid.pid"
(sh -c "trap \"\" HUP TERM; echo \$\$ > \"\$0/double.tmp\"; mv \"\$0/double.tmp\" \"\$0/double.pid\"; exec sleep 600" "$0" &)
exec sleep 600
' "$1" </dev/null >/dev/null 2>&1 &
