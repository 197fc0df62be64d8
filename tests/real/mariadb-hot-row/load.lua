-- sysbench load for tests/real/mariadb-hot-row: each event is one
-- transaction that updates a row and reads it back. --hot=on: always row 1
-- (every connection queues on its row lock); off: a random row of --rows.
sysbench.cmdline.options = {
    hot = {"update row 1 in every transaction", false},
    rows = {"rows in the table", 100000},
}

function thread_init()
    drv = sysbench.sql.driver()
    con = drv:connect()
end

function thread_done()
    con:disconnect()
end

function event()
    local id = 1
    if not sysbench.opt.hot then
        id = sysbench.rand.uniform(1, sysbench.opt.rows)
    end
    con:query("BEGIN")
    con:query("UPDATE t SET v = v + 1 WHERE id = " .. id)
    con:query("SELECT v FROM t WHERE id = " .. id)
    con:query("COMMIT")
end
